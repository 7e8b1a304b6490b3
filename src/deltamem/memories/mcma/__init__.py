"""MCMA: Meta-Cognitive Memory Abstraction (Liang et al., *Learning How to Remember: A
Meta-Cognitive Management Method for Structured and Transferable Agent Memory*).

A frozen task model acts; a *memory copilot* turns trajectories into structured,
abstracted memories, is trained on preference pairs built from downstream utility
(SFT then DPO), and the memories are organised in abstraction levels H0–H2.

Modules (one concept each):

* :mod:`.grammar`: the action kinds the rule-based preprocessing reads;
* :mod:`.preprocess`: §3.1 / Algorithm 1, trajectory → pruned task tree;
* :mod:`.structures`: §3.2, the four structural primitives, nested, as typed models;
* :mod:`.prompts`: prompt templates and validated JSON calls.
"""
