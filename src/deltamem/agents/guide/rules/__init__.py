"""The guide's built-in rules, one module each, in the order every domain asks them today
(:data:`deltamem.envs.base.GUIDE_RULES`):

* ``put-away`` (:mod:`~deltamem.agents.guide.rules.put_away`): things that belong somewhere
  are put there (a tidying recall);
* ``follow`` (:mod:`~deltamem.agents.guide.rules.follow`): the pointed step, realised here;
* ``look-ahead`` (:mod:`~deltamem.agents.guide.rules.look_ahead`): a later goal step
  realisable here;
* ``return-to-place`` (:mod:`~deltamem.agents.guide.rules.return_to_place`): back to where
  the procedure does the blocked step;
* ``open-closed`` (:mod:`~deltamem.agents.guide.rules.open_closed`): look inside what is
  closed here;
* ``backtrack`` (:mod:`~deltamem.agents.guide.rules.backtrack`): an earlier step retried
  elsewhere;
* ``search-unvisited`` (:mod:`~deltamem.agents.guide.rules.search_unvisited`): any place not
  visited yet.

They are registered by name in :mod:`deltamem.agents.guide.registry`.
"""
