"""What makes a comment or string say "workaround": upstream references and the words people use.

Read by ``tracker.census.scan`` on the text of one comment block, docstring paragraph or
string. A reference is what a ``[[tracked]]`` entry can wait on or link to: ``owner/repo#N``
(also written as a GitHub issue or pull request address, or as ``pytorch#N`` for the few
repositories vLLM's comments name that way), any other ``https://`` address, and a
``TODO(torch>=2.14)``-style version condition.
"""

from __future__ import annotations

import re

# ``pytorch#191458``: the repositories vLLM's comments name by their short name alone.
SHORT_NAMES = {
    "pytorch": "pytorch/pytorch",
    "torch": "pytorch/pytorch",
    "vllm": "vllm-project/vllm",
    "vllm-xpu-kernels": "vllm-project/vllm-xpu-kernels",
    "triton": "triton-lang/triton",
    "intel-xpu-backend-for-triton": "intel/intel-xpu-backend-for-triton",
    "ipex": "intel/intel-extension-for-pytorch",
}
_GITHUB_ITEM = re.compile(r"https?://github\.com/(?P<owner>[A-Za-z0-9-]+)/(?P<repo>[\w.-]+)/"
                          r"(?:issues|pull)/(?P<number>[1-9][0-9]*)(?:[/?#][^\s)\]>'\"`]*)?")
_URL = re.compile(r"https?://[^\s)\]>'\"`]+")
_FULL_REF = re.compile(r"(?<![\w./-])(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<repo>[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]*)\b")
_SHORT_REF = re.compile(r"(?<![\w./-])(?P<name>[A-Za-z][\w.-]*)#(?P<number>[1-9][0-9]*)\b")
_CONDITION = re.compile(r"\bTODO\(\s*(?P<condition>[A-Za-z][\w.-]*\s*(?:>=|<=|==|~=|>|<)\s*[0-9][0-9A-Za-z.]*)\s*\)")

# The words of a temporary measure or a known defect: each pattern is one way people write it.
# ``until`` and ``for now`` only where they bound a measure in time, not a loop or a wait.
_TEMPORARY = (
    r"\bwork[- ]?arounds?\b", r"\bworks? around\b", r"\bworked around\b", r"(?-i:\bWA\b)",
    r"\bhack(?:s|y|ed)?\b", r"(?-i:\bFIXME\b)", r"\bremove (?:this |these |it |them )?(?:once|when|after|if)\b", r"\bcan be removed\b",
    r"\bdrop (?:this |these |it |them )?(?:once|when|after)\b", r"\btemporar(?:y|ily)\b", r"\bfor now\b",
    r"(?<!\bwait )(?<!\bwaits )(?<!\bloop )(?<!\bblock )(?<!\bblocks )\buntil (?:the |a |an )?"
    r"(?:upstream|fix|fixed|torch|pytorch|triton|oneccl|onednn|oneapi|driver|kernels?|support|supported|"
    r"we|it|they|xpu|intel|ipex|release|released|[\w.-]+ (?:is|are|has|have|lands?|supports?))\b",
    r"\bnot (?:yet )?supported yet\b", r"\bnot yet supported\b", r"\bdoes(?: not|n't) (?:yet )?support\b[^.;]*\byet\b",
)
_DEFECT = (
    r"\bknown (?:issue|bug|problem|limitation)s?\b", r"\bbugs?\b", r"\bbuggy\b", r"\bregression\b",
    r"\bprecision (?:loss|issues?|problems?)\b", r"\bcrash(?:es|ed)?\b", r"\bhangs?\b", r"\bleaks?\b",
    r"\bsegfaults?\b", r"\bmisdetect", r"\bNaN\b", r"\bgarbage values?\b",
    r"\bnot (?:[\w-]+ ){0,2}(?:bitwise|deterministic|reproducible)\b", r"\bunexpected (?:failures?|errors?|results?)\b",
    r"\b(?:incorrect|wrong) (?:answers?|results?|outputs?|values?)\b", r"\binvalid memory access\b",
)
# What a platform has not got: a workaround in a comment on XPU-only code ("# uneven reduce_scatter is
# not supported ..." above the padding that stands in for it), plain dispatch in a message
# ("Flash Attention on XPU does not support float32 dtype. Falling back ...").
_GAP = (
    r"\bnot supported\b", r"\bunsupported\b", r"\bnot implemented\b",
    r"\bdoes(?: not|n't) (?:support|accept|work|handle|implement)\b",
)
STRONG = re.compile("|".join((*_TEMPORARY, *_DEFECT)), re.IGNORECASE)
GAP = re.compile("|".join(_GAP), re.IGNORECASE)
XPU = re.compile(r"xpu", re.IGNORECASE)


def references(text: str) -> list[str]:
    """The upstream references ``text`` names, in the order it names them, each once:
    ``owner/repo#N``, other addresses as written, version conditions (``torch>=2.14``)."""
    found: list[tuple[int, str]] = []

    def blank(match: re.Match[str]) -> str:  # read once: the same length, so later positions hold
        return " " * len(match.group())

    rest = text
    found += [(m.start(), f"{m['owner']}/{m['repo']}#{m['number']}") for m in _GITHUB_ITEM.finditer(rest)]
    rest = _GITHUB_ITEM.sub(blank, rest)
    found += [(m.start(), m.group().rstrip(".,;:")) for m in _URL.finditer(rest)]
    rest = _URL.sub(blank, rest)
    found += [(m.start(), f"{m['owner']}/{m['repo']}#{m['number']}") for m in _FULL_REF.finditer(rest)]
    rest = _FULL_REF.sub(blank, rest)
    found += [(m.start(), f"{SHORT_NAMES[m['name'].lower()]}#{m['number']}") for m in _SHORT_REF.finditer(rest)
              if m["name"].lower() in SHORT_NAMES]
    found += [(m.start(), re.sub(r"\s+", "", m["condition"])) for m in _CONDITION.finditer(text)]
    return list(dict.fromkeys(ref for _, ref in sorted(found)))


def trackable(found: list[str]) -> list[str]:
    """Of ``references``' answer, what a workaround can wait on: issues, pull requests and version
    conditions (an address alone may be documentation)."""
    return [ref for ref in found if not ref.startswith("http")]


def says_workaround(text: str, *, message: bool = False) -> bool:
    """``text`` names an issue, a pull request or a version condition, or uses the words of a
    workaround; a ``message`` (a string the code logs or returns) only the words of a temporary
    measure or a defect, never those of a missing feature. A plain address or a TODO alone is not enough."""
    if STRONG.search(text) is not None:
        return True
    named = "#" in text or "TODO(" in text or "/issues/" in text or "/pull/" in text  # most texts: no look
    if named and trackable(references(text)):
        return True
    return not message and GAP.search(text) is not None


def mentions_xpu(text: str) -> bool:
    return XPU.search(text) is not None
