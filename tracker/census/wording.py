"""What makes a comment or string say "workaround": upstream references and the words people use.

Read by ``tracker.census.scan`` on the text of one comment block, docstring paragraph or
string. A reference is what a ``[[tracked]]`` entry can wait on or link to: ``owner/repo#N``
(also written as a GitHub issue or pull request address, or as ``pytorch#N`` for the few
repositories vLLM's comments name that way, or in words: "pytorch issue #N", "torch-xpu-ops
issue N"), any other ``https://`` address, and a ``TODO(torch>=2.14)``-style version condition.
Every reference is written one way, ``owner/repo#N``.

Every pattern here has bounded windows (``{0,200}``, never ``*`` before a later word): a
comment block of any length is read in time linear in its length.
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
    "torch-xpu-ops": "intel/torch-xpu-ops",
}
_GITHUB_ITEM = re.compile(r"https?://github\.com/(?P<owner>[A-Za-z0-9-]+)/(?P<repo>[\w.-]+)/"
                          r"(?:issues|pull)/(?P<number>[1-9][0-9]*)(?:[/?#][^\s)\]>'\"`]{0,500})?")
_URL = re.compile(r"https?://[^\s)\]>'\"`]{1,2000}")
_FULL_REF = re.compile(r"(?<![\w./-])(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<repo>[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]*)\b")
_SHORT_REF = re.compile(r"(?<![\w./-])(?P<name>[A-Za-z][\w.-]*)#(?P<number>[1-9][0-9]*)\b")
# "pytorch issue #123", "torch-xpu-ops issue 456", "vllm PR #7", "pytorch/pytorch issue 8": a
# repository named by its short or full name, then the kind of item and its number in words.
_WORDED_REF = re.compile(r"(?<![\w./-])(?P<name>[A-Za-z][\w.-]{0,100}(?:/[A-Za-z0-9_.-]{1,100})?)[ \t]{1,3}"
                         r"(?:issues?|PRs?|pull requests?|pulls?|bugs?)[ \t]{0,3}:?[ \t]{0,3}(?:#[ \t]?|number[ \t]{1,3}|no\.?[ \t]{0,3})?"
                         r"(?P<number>[1-9][0-9]{0,9})\b", re.IGNORECASE)
_CONDITION = re.compile(r"\bTODO\(\s*(?P<condition>[A-Za-z][\w.-]*\s*(?:>=|<=|==|~=|>|<)\s*[0-9][0-9A-Za-z.]*)\s*\)")

# The words of a temporary measure (and of a known issue or limitation, which names itself as one)
# or of a defect: each pattern is one way people write it.
# ``until`` and ``for now`` only where they bound a measure in time, not a loop or a wait.
_TEMPORARY = (
    r"\bwork[- ]?arounds?\b", r"\bworks? around\b", r"\bworked around\b", r"(?-i:\bWA\b)",
    r"\bhack(?:s|y|ed)?\b", r"\bremove (?:this |these |it |them )?(?:once|when|after|if)\b", r"\bcan be removed\b",
    r"\bdrop (?:this |these |it |them )?(?:once|when|after)\b", r"\btemporar(?:y|ily)\b", r"\bfor now\b",
    r"(?<!\bwait )(?<!\bwaits )(?<!\bloop )(?<!\bblock )(?<!\bblocks )\buntil (?:the |a |an )?"
    r"(?:upstream|fix|fixed|torch|pytorch|triton|oneccl|onednn|oneapi|driver|kernels?|support|supported|"
    r"we|it|they|xpu|intel|ipex|release|released|[\w.-]{1,100} (?:is|are|has|have|lands?|supports?))\b",
    r"\bnot (?:yet )?supported yet\b", r"\bnot yet supported\b", r"\bdoes(?: not|n't) (?:yet )?support\b[^.;]{0,200}\byet\b",
    r"(?-i:\bW/A\b)", r"\bknown (?:[\w-]{1,40} ){0,2}(?:issue|bug|problem|limitation)s?\b",
)
_DEFECT = (
    r"\bbugs?\b", r"\bbuggy\b", r"\bregression\b",
    r"\bprecision (?:loss|issues?|problems?)\b", r"\bcrash(?:es|ed)?\b", r"\bhangs?\b", r"\bleaks?\b",
    r"\bsegfaults?\b", r"\bmisdetect", r"\bNaN\b", r"\bgarbage values?\b",
    r"\bnot (?:[\w-]{1,100} ){0,2}(?:bitwise|deterministic|reproducible)\b", r"\bunexpected (?:failures?|errors?|results?)\b",
    r"\b(?:incorrect|wrong) (?:answers?|results?|outputs?|values?)\b", r"\binvalid memory access\b",
)
# What a platform has not got: a workaround in a comment on XPU-only code ("# uneven reduce_scatter is
# not supported ..." above the padding that stands in for it), plain dispatch in a message
# ("Flash Attention on XPU does not support float32 dtype. Falling back ...").
_GAP = (
    r"\bnot supported\b", r"\bunsupported\b", r"\bnot implemented\b", r"\brejects?\b",
    r"\bdoes(?: not|n't) (?:yet )?(?:support|accept|work|handle|implement|provide)\b",
    r"\blacks?\b", r"\black of\b", r"\bno (?:[\w-]{1,40} ){0,2}support\b",
    r"\bonly (?:supports?|accepts?|handles?|works?)\b", r"(?<!\bthe )\bonly supported\b", r"\bcannot\b", r"\bcan't\b",
    r"\bcan not\b", r"\bunable to\b", r"\bnot valid\b",
)
# What a component wants, weaker than a gap: the XPU implementation's own preparation says it too
# ("oneDNN requires a contiguous layout"); it counts beside a defect or a temporary measure.
_NEED = (r"\brequires?\b", r"\bneeds?\b", r"\bexpects?\b", r"\b(?:has|have) no\b")
# A fallback or a switch-off said in words: the log line of a logged fallback, the comment of a switch.
_SWITCH = (
    r"\bfall(?:s|ing)? ?back\b", r"\bfallbacks?\b", r"\bdisabl(?:e|es|ed|ing)\b", r"\bturn(?:s|ed|ing)? off\b",
    r"\bswitch(?:es|ed|ing)? off\b", r"\bskip(?:s|ped|ping)?\b", r"\binstead\b",
)
# The components an XPU workaround waits on (the definition's list), and XPU's own kernels.
_COMPONENT = (
    r"\btorch\b", r"\bpytorch\b", r"\binductor\b", r"\bdynamo\b", r"\bipex\b", r"intel[- ]extension",
    r"\bone(?:dnn|ccl|mkl|api)\b", r"\bccl\b", r"\bxccl\b", r"\bmkl\b", r"\blevel[- ]zero\b", r"\bdriver\b",
    r"\btriton\b", r"\bkernels?\b", r"\bray\b", r"\bucx\b", r"\bdpctl\b", r"\bsycl\b", r"\boperators?\b",
    r"\bop\b",
)
# Not a workaround whatever else it says (unless it names a temporary measure or a reference): a user's
# explicit choice honoured, an explanation of a past fix, vLLM's interfaces shaped after CUDA's, a fact
# of the platform.
_NOT_A_GAP = (
    r"\bexplicitly (?:requested|set|asked|chosen|selected)\b", r"\bopt[- ]in\b", r"\bpreviously\b",
    r"\bused to\b", r"\bidentified\b", r"\bdiffers? from cuda", r"\bcompatible (?:to|with) cuda", r"\bxpu uses\b",
    r"\bdoes(?: not|n't) (?:yet )?support xpu\b", r"\bnot (?:yet )?ported\b",
    # facts of the platform no fix will change (the definition's own examples): unsigned USM addresses,
    # spawn as the only start method
    r"\b(?:addresses|pointers)\b[^.;]{0,60}\bunsigned\b", r"\bunsigned\b[^.;]{0,60}\b(?:addresses|pointers)\b",
    r"\bspawn is the only\b",
)
# XPU named among other platforms ("cpu/xpu runners", "ROCm and XPU take the Triton path"): the text is
# about several platforms' choice, not about what XPU lacks.
_PLATFORM_LIST = re.compile(r"\b(?:cpu|rocm|tpu|hpu|cuda|gpu)s?(?: devices?)?\s*(?:/|,|\band\b|\bor\b)\s*xpus?\b|"
                            r"\bxpus?(?: devices?)?\s*(?:/|,|\band\b|\bor\b)\s*(?:cpu|rocm|tpu|hpu|cuda)\b",
                            re.IGNORECASE)
# XPU singled out: "except on XPU", "not on XPU", "skipped on XPU".
EXCEPT_XPU = re.compile(r"\b(?:except|not|skip(?:ped)?|disabled?) (?:on|for) xpus?\b", re.IGNORECASE)
# What a refusal names when it is a known gap, not vLLM's own plan ("for now"): a known issue or
# limitation, an upstream reference.
KNOWN = re.compile(r"\bknown (?:[\w-]{1,40} ){0,2}(?:issue|bug|problem|limitation)s?\b", re.IGNORECASE)
_ITEM_WORD = re.compile(r"/issues/|/pull/|\b(?:issues?|PRs?|pull requests?|pulls?|bugs?)[ \t]{0,3}:?[ \t]{0,3}#?[ \t]?[0-9]",
                        re.IGNORECASE)
TEMPORARY = re.compile("|".join(_TEMPORARY), re.IGNORECASE)
DEFECT = re.compile("|".join(_DEFECT), re.IGNORECASE)
GAP = re.compile("|".join(_GAP), re.IGNORECASE)
NEED = re.compile("|".join(_NEED), re.IGNORECASE)
SWITCH = re.compile("|".join(_SWITCH), re.IGNORECASE)
OFF = re.compile(r"\bdisabl(?:e|es|ed|ing)\b|\bturn(?:s|ed|ing)? off\b|\bswitch(?:es|ed|ing)? off\b|\bskip(?:s|ped|ping)?\b",
                 re.IGNORECASE)
FALLING_BACK = re.compile(r"\bfall(?:s|ing)? ?back\b|\bfallbacks?\b|\binstead\b", re.IGNORECASE)
COMPONENT = re.compile("|".join(_COMPONENT), re.IGNORECASE)
NOT_A_GAP = re.compile("|".join(_NOT_A_GAP), re.IGNORECASE)
XPU = re.compile(r"xpu", re.IGNORECASE)
XPU_WORD = re.compile(r"(?<!\w)xpus?(?![\w(])|\bxpu's\b", re.IGNORECASE)


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
    found += [(m.start(), f"{repository}#{m['number']}") for m in _WORDED_REF.finditer(rest)
              if (repository := _repository(m["name"])) is not None]
    found += [(m.start(), re.sub(r"\s+", "", m["condition"])) for m in _CONDITION.finditer(text)]
    return list(dict.fromkeys(ref for _, ref in sorted(found)))


def _repository(name: str) -> str | None:
    """``owner/repo`` for a repository written as ``owner/repo`` or by a short name; None for another word."""
    if "/" in name:
        return name
    return SHORT_NAMES.get(name.lower())


def trackable(found: list[str]) -> list[str]:
    """Of ``references``' answer, what a workaround can wait on: issues, pull requests and version
    conditions (an address alone may be documentation)."""
    return [ref for ref in found if not ref.startswith("http")]


def says_workaround(text: str, *, defects: bool = True, gaps: bool = True) -> bool:
    """``text`` names an issue, a pull request or a version condition, or uses the words of a
    temporary measure; or, where asked, of a known defect (``defects``) or of what a platform has
    not got (``gaps``). A string the code logs reads with neither: a defect or a missing feature
    named in a message is what a user is warned of (the consequence of a choice, a fallback), not
    how the code works around it. A plain address or a TODO alone is not enough."""
    if TEMPORARY.search(text) is not None:
        return True
    if defects and DEFECT.search(text) is not None:
        return True
    if names_reference(text):
        return True
    return gaps and GAP.search(text) is not None


def only_a_gap(text: str) -> bool:
    """``text`` says "workaround" only by naming what a platform has not got ("does not support"):
    above a table of backends that is dispatch, not a workaround."""
    return (TEMPORARY.search(text) is None and DEFECT.search(text) is None and not names_reference(text)
            and GAP.search(text) is not None)


def names_reference(text: str) -> bool:
    """``text`` names an issue, a pull request or a version condition."""
    named = "#" in text or "TODO(" in text or _ITEM_WORD.search(text) is not None  # most texts: no look
    return named and bool(trackable(references(text)))


def mentions_xpu(text: str) -> bool:
    return XPU.search(text) is not None


def about_xpu(text: str) -> bool:
    """``text`` names XPU as a word ("XPU lacks", "the XPU kernel"), not inside an identifier
    (``XPUExpertsWNA16``) nor only among other platforms ("cpu/xpu runners")."""
    return XPU_WORD.search(_PLATFORM_LIST.sub(" ", text)) is not None
