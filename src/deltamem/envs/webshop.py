"""WebShop adapter (Yao et al., 2022): a client for a WebShop web server you run yourself.

Start the original server (``princeton-nlp/WebShop``: ``python -m web_agent_site.app``,
port 3000, human goals) and point :class:`WebShopEnv` at it. Nothing is
downloaded; the adapter only speaks HTTP (``httpx``) and reads the HTML pages:

* observation = the page's visible text in WebShop's simple text mode: text
  nodes joined by ``" [SEP] "`` (scripts, styles, comments, ``hidden`` and
  ``display:none`` elements left out, so the done page's hidden target record
  never reaches the agent);
* actions = ``search[<keywords>]`` when the page has the search box, and
  ``click[<label>]`` for every button, product link (the ASIN) and option
  value (radio button) on the page; clicks match case-insensitively;
* goal = the instruction text; scene = the instruction text too (the product
  category is unknown before searching);
* a ``done`` page ends the episode with its reward (0-1); success = reward 1.

A session is ``<session_prefix><goal index>``; the server's ``fixed_<i>``
sessions always serve goal ``i``. An action that is not available leaves the
page as it is (``valid=False``), as in WebShop's own text environment.
Server errors (unreachable, HTTP >= 400) raise :class:`RuntimeError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.errors import ConfigError
from deltamem.seeding import check_random_state
from deltamem.types import Task

__all__ = ["PAPER_TEST_GOALS", "SEARCH_ACTION", "Page", "WebShopEnv", "parse_page"]

#: the admissible-list entry for a search (``<keywords>`` is a placeholder)
SEARCH_ACTION = "search[<keywords>]"

# The 200 evaluation goals of Song et al. (2024) (ETO ``test_indices.json``), in order.
_PAPER_TEST = """
2853 5934 1642 4914 4805 9666 900 6133 10887 11543 2583 2933 1689 6351 580 10031 1451 11390
3403 11870 8693 8359 6719 5413 8255 9639 9188 1346 10959 4705 3917 3503 3584 6446 3141 9645
3847 10151 1035 5030 9911 5009 11861 4417 8891 2367 11882 3936 11580 1190 10965 1414 8695
485 10886 9102 2980 3230 6990 3854 9680 4117 3229 8120 10558 8089 10126 11155 4944 8573 7624
8330 9744 10660 3466 1427 5948 6453 7331 5433 6943 3642 10183 10364 5825 5492 5613 2640 7097
7375 7368 3134 4288 8725 10939 8231 6770 3569 10789 5757 7828 8459 10584 9518 5023 11809
4656 5720 7475 4161 5455 10072 3841 7802 7265 5144 4196 5457 6604 604 3742 861 7232 4249
9346 4999 7235 7603 7057 6766 6074 4886 8208 7572 11151 9169 1301 4530 1143 314 3012 7209
6275 8387 9794 10438 950 9963 2828 5563 11358 5900 2751 1857 6925 4962 11572 5375 11322 6206
11831 1145 5068 6686 11020 7953 1254 8897 9439 4465 10188 11896 3137 978 7922 6115 2159 4318
11755 3354 4078 7999 7607 9021 988 10982 6596 846 1211 7662 3838 8434 2731 4415 1410 1735
4773 7378 3944 818
"""
#: the paper's 200 WebShop episodes (goal indices, reference order)
PAPER_TEST_GOALS: tuple[int, ...] = tuple(int(x) for x in _PAPER_TEST.split())
_TRAIN_START = 1500  # WebShop's own split: goals >= 1500 are training goals

_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_IGNORED = {"head", "title", "script", "style", "meta", "noscript", "template"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
         "source", "track", "wbr"}
_FLOAT = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Clickable:
    """Something ``click[label]`` can act on: how to follow it."""

    label: str
    method: str
    url: str


@dataclass
class Page:
    """What the adapter reads from one HTML page."""

    texts: list[str] = field(default_factory=list)
    instruction: str = ""
    search: Clickable | None = None  # the search form (url = form action)
    search_field: str = "search_query"
    clickables: list[Clickable] = field(default_factory=list)
    reward: float | None = None

    @property
    def text(self) -> str:
        """Simple-text-mode observation."""
        return " [SEP] ".join(self.texts)

    def actions(self) -> list[str]:
        """Available actions, search first, then clicks in page order (labels unique)."""
        out = [SEARCH_ACTION] if self.search is not None else []
        seen: set[str] = set()
        for c in self.clickables:
            if c.label.casefold() not in seen:
                seen.add(c.label.casefold())
                out.append(f"click[{c.label}]")
        return out

    def find(self, label: str) -> Clickable | None:
        key = " ".join(label.split()).casefold()
        return next((c for c in self.clickables if c.label.casefold() == key), None)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        # stack of (tag, hidden, attrs)
        self.stack: list[tuple[str, bool, dict[str, str]]] = []
        self.collect: list[list[str]] = []  # open text collectors (button / link / h4 / pre)
        self.collect_of: list[str] = []  # what each collector is for
        self.search_form: dict[str, str] | None = None

    # helpers
    def _hidden(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def _inside(self, pred: Any) -> dict[str, str] | None:
        for _tag, _hidden, attrs in reversed(self.stack):
            if pred(_tag, attrs):
                return attrs
        return None

    def _form(self) -> dict[str, str] | None:
        return self._inside(lambda t, _a: t == "form")

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {k: (v or "") for k, v in attrs_list}
        style = attrs.get("style", "").replace(" ", "").lower()
        hidden = (self._hidden() or tag in _IGNORED or "hidden" in attrs
                  or "display:none" in style)
        if tag == "input" and not hidden:
            self._input(attrs)
        if tag in _VOID:
            return
        self.stack.append((tag, hidden, attrs))
        if hidden:
            return
        if tag == "button":
            self._open("button")
        elif tag == "a" and "product-link" in attrs.get("class", "").split():
            self._open("link")
        elif tag == "h4" and not self.page.instruction and self._in_id("instruction-text") \
                and "instruction" not in self.collect_of:
            self._open("instruction")
        elif tag == "pre" and self._in_id("reward"):
            self._open("reward")

    def _in_id(self, ident: str) -> bool:
        return self._inside(lambda _t, a: a.get("id") == ident) is not None

    def _open(self, what: str) -> None:
        self.collect.append([])
        self.collect_of.append(what)

    def _input(self, attrs: dict[str, str]) -> None:
        form = self._form()
        if attrs.get("id") == "search_input":
            self.search_form = form
            form = form or {}
            self.page.search = Clickable("search", form.get("method", "get").upper(),
                                         form.get("action", ""))
            self.page.search_field = attrs.get("name", "search_query")
        elif attrs.get("type", "").lower() == "radio" and attrs.get("value"):
            url = attrs.get("data-url", "")
            if url:
                self.page.clickables.append(Clickable(" ".join(attrs["value"].split()), "GET", url))

    def handle_endtag(self, tag: str) -> None:
        if not any(t == tag for t, _h, _a in self.stack):
            return  # stray end tag (the WebShop templates have a few)
        while self.stack:
            open_tag, hidden, attrs = self.stack.pop()
            if not hidden:
                self._close(open_tag, attrs)
            if open_tag == tag:
                break

    def _close(self, tag: str, attrs: dict[str, str]) -> None:
        what = {"button": "button", "a": "link", "h4": "instruction", "pre": "reward"}.get(tag)
        if what is None or not self.collect_of or self.collect_of[-1] != what:
            return
        text = " ".join(" ".join(self.collect.pop()).split())
        self.collect_of.pop()
        if what == "button":
            form = self._form()
            if form is None:
                form = {}
            if text and form is not self.search_form:  # the search box's own submit button
                self.page.clickables.append(
                    Clickable(text, form.get("method", "get").upper(), form.get("action", "")))
        elif what == "link":
            if text and attrs.get("href"):
                self.page.clickables.append(Clickable(text, "GET", attrs["href"]))
        elif what == "instruction":
            self.page.instruction = re.sub(r"^\s*instruction\s*:\s*", "", text, flags=re.I)
        elif what == "reward":
            nums = _FLOAT.findall(text)
            if nums:
                self.page.reward = float(nums[-1])

    def handle_data(self, data: str) -> None:
        if self._hidden():
            return
        text = data.strip()
        if not text:
            return
        self.page.texts.append(" ".join(text.split()))
        for buf in self.collect:
            buf.append(text)


def parse_page(html: str) -> Page:
    """Parse one WebShop page (see the module docstring for what is read)."""
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.page


class WebShopEnv(Environment):
    """A WebShop server behind the :class:`Environment` contract.

    Args:
        base_url: the server's address.
        session_prefix: sessions are ``<prefix><goal index>`` (``fixed_`` selects
            the goal by index on the original server).
        timeout: seconds per HTTP request.
        max_steps: step cap (10, as in the reference evaluation of the paper's
            200-episode set).
        n_train: size of the ``train`` split.
        transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``).

    Splits: ``test`` = :data:`PAPER_TEST_GOALS` (the paper's 200 episodes);
    ``train`` = the first ``n_train`` goals from index 1500 (WebShop's training
    range) that are not in ``test``. ``seed=0`` keeps the listed order; another
    seed shuffles it.
    """

    name = "webshop"
    domain = "webshop"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits = ("test", "train")

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:3000",
        session_prefix: str = "fixed_",
        timeout: float = 30.0,
        max_steps: int = 10,
        n_train: int = 1000,
        transport: Any = None,
    ) -> None:
        self.base_url = base_url
        self.session_prefix = session_prefix
        self.timeout = timeout
        self.max_steps_cap = max_steps
        self.n_train = n_train
        self.transport = transport
        self._client: Any = None
        self._page: Page | None = None
        self._url = ""
        self._task: Task | None = None
        self._done = False
        self._steps = 0

    # -- HTTP ---------------------------------------------------------------------------

    def _http(self) -> Any:
        if self._client is None:
            if not isinstance(self.max_steps_cap, int) or self.max_steps_cap < 1:
                raise ConfigError(f"max_steps must be a positive int, got {self.max_steps_cap!r}")
            try:
                import httpx
            except ImportError as e:
                raise ConfigError("WebShop needs the 'httpx' package: pip install httpx") from e
            self._client = httpx.Client(base_url=self.base_url, timeout=self.timeout,
                                        transport=self.transport, follow_redirects=True)
        return self._client

    def _fetch(self, method: str, url: str, data: dict[str, str] | None = None) -> Page:
        import httpx

        target = urljoin(self._url or self.base_url.rstrip("/") + "/", url)
        try:
            resp = self._http().request(method, target, data=data)
        except httpx.HTTPError as e:
            raise RuntimeError(f"WebShop server {self.base_url} failed on {method} {target}: "
                               f"{e!r}") from e
        if resp.status_code >= 400:
            raise RuntimeError(f"WebShop server answered HTTP {resp.status_code} to "
                               f"{method} {resp.url}")
        self._url = str(resp.url)
        self._page = parse_page(resp.text)
        return self._page

    # -- contract ---------------------------------------------------------------------------

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """Session ids of ``split`` (see the class docstring)."""
        if split == "test":
            goals = list(PAPER_TEST_GOALS)
        elif split == "train":
            if not isinstance(self.n_train, int) or self.n_train < 0:
                raise ConfigError(f"n_train must be a non-negative int, got {self.n_train!r}")
            held_out = set(PAPER_TEST_GOALS)
            goals = []
            i = _TRAIN_START
            while len(goals) < self.n_train:
                if i not in held_out:
                    goals.append(i)
                i += 1
        else:
            raise ConfigError(f"unknown WebShop split {split!r}; known: {', '.join(self.splits)}")
        if seed != 0:
            check_random_state(seed).shuffle(goals)
        return [f"{self.session_prefix}{g}" for g in goals]

    def reset(self, task_id: str) -> Task:
        """Open the session's start page and return its instruction as the task."""
        session = str(task_id)
        if not session or "/" in session or any(ch.isspace() for ch in session):
            raise ConfigError(f"bad WebShop session id {task_id!r}")
        self._http()
        self._url = ""
        page = self._fetch("GET", f"/{session}")
        if not page.instruction:
            raise RuntimeError(f"WebShop start page of {session!r} shows no instruction")
        digits = re.search(r"(\d+)$", session)
        goal_idx = int(digits.group(1)) if digits else None
        split = ("test" if goal_idx in PAPER_TEST_GOALS
                 else "train" if goal_idx is not None and goal_idx >= _TRAIN_START else "")
        self._task = Task(
            id=session,
            goal=page.instruction,
            scene=page.instruction,
            domain=self.domain,
            split=split,
            observation=page.text,
            max_steps=self.max_steps_cap,
            meta={"task_type": "webshop", "goal_index": goal_idx},
        )
        self._done = False
        self._steps = 0
        return self._task

    def admissible_actions(self) -> list[str]:
        """``search[<keywords>]`` (when searchable) and the page's ``click[...]`` actions."""
        return self._require().actions()

    def step(self, action: str) -> Transition:
        """Search or click; see the module docstring for validity, reward and success."""
        page = self._require()
        if self._done:
            raise RuntimeError("episode is over; call reset() first")
        m = _ACTION.match(action)
        target: tuple[str, str, dict[str, str] | None] | None = None
        if m is not None:
            kind, arg = m.group(1).lower(), " ".join(m.group(2).split())
            if kind == "search" and arg and page.search is not None:
                target = (page.search.method or "POST", page.search.url,
                          {page.search_field: arg})
            elif kind == "click" and arg:
                hit = page.find(arg)
                if hit is not None:
                    target = (hit.method, hit.url, None)
        self._steps += 1
        if target is not None:
            page = self._fetch(*target)
        reward = page.reward
        done = reward is not None or self._steps >= self.max_steps_cap
        self._done = done
        score = min(max(reward or 0.0, 0.0), 1.0)
        return Transition(observation=page.text, score=score, done=done,
                          success=reward is not None and reward >= 1.0, valid=target is not None)

    def max_steps(self, task: Task) -> int:
        return task.max_steps or self.max_steps_cap

    def close(self) -> None:
        """Close the HTTP client."""
        client, self._client = self._client, None
        self._page = self._task = None
        if client is not None:
            client.close()

    def _require(self) -> Page:
        if self._page is None or self._task is None:
            raise RuntimeError("no episode in progress; call reset(task_id) first")
        return self._page

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments (for run records; the transport is left out)."""
        return {"base_url": self.base_url, "session_prefix": self.session_prefix,
                "timeout": self.timeout, "max_steps": self.max_steps_cap,
                "n_train": self.n_train}
