"""The one grader: is a completion's final answer mathematically equivalent to the gold answer?

Built on math-verify (``parse`` + ``verify``); model output is never ``eval``-ed or ``exec``-ed.

Extraction (``GradeResult.extracted``):

1. Only the text after the last ``</think>`` is considered (the whole completion if there is none),
   and of that only the last ``MAX_TAIL_CHARS`` characters, so 1 MB of output costs nothing. A
   completion that opened a ``<think>`` block and never closed it (cut by the token budget) has no
   final answer: whatever it holds is unfinished reasoning (``"<think>\\n88-52="`` is not an answer
   of 88), and it is graded incorrect with nothing extracted.
2. The last ``\\boxed{...}`` (or ``\\fbox{...}``) whose braces balance within ``MAX_ANSWER_CHARS``
   characters wins: with several boxed answers, the **last** one is the answer (the model's final
   word), and an unclosed or absurdly long one is skipped.
3. Without a boxed answer, math-verify's own LaTeX / plain-expression extraction runs on that tail
   (``"the final answer is $3$"``, ``"... = 42"``); an extracted answer longer than
   ``MAX_ANSWER_CHARS`` is no answer, as a boxed one would be.

Gold answers are parsed the same way (wrapped in ``\\boxed{}``); a gold answer math-verify cannot
parse into a mathematical object (``\\frac{``, ``???``: it then keeps only the raw string, and would
compare strings) is *unscorable*: such samples are never counted correct and are reported separately.

Answer form (``answer_in_form``): math-verify grades an extracted *expression* equal to its value, so a
model that restates the problem ("The answer is 75-51.") is graded correct for a gold 24; the ``number``
form counts a verdict only where the extracted answer is a plain number (``cwgrpo evaluate``'s
``answer_form``, the ``number_accuracy`` reward).

Time budget: math-verify's own timeouts use ``signal.alarm`` with whole seconds of wall-clock time, so a
busy machine would grade a right answer wrong. Here they are switched off and a budget of CPU time
(``cwgrpo.grading.time_budget``; ``timeout_s``, default ``DEFAULT_TIMEOUT_S``) bounds the gold's parse and
the answer's (extraction, parse, verify): the verdict is the same on an idle and a busy machine. An answer
that runs out is graded incorrect with ``timed_out`` set, an outcome that summaries count and Table 1 flags.
Signals only reach a process's main thread, so ``grade_detailed`` called from another thread hands the work
to a helper process, and ``grade_many`` grades in a pool of processes (each worker grades in its main thread).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import math
import multiprocessing
import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures.process import BrokenProcessPool
from decimal import Decimal
from typing import Any

from cwgrpo.grading.lifetime import pool_options
from cwgrpo.grading.time_budget import MAX_SECONDS, TimeBudget

MAX_TAIL_CHARS = 8000  # characters of the completion (after the last </think>) that are searched
MAX_ANSWER_CHARS = 400  # a boxed answer longer than this is not an answer
MAX_BOXED_CANDIDATES = 16  # how many \boxed occurrences (from the end) are tried before giving up
DEFAULT_TIMEOUT_S = 3.0  # CPU seconds for grading one answer (normal answers take milliseconds)
_BOXED_COMMANDS = ("\\boxed", "\\fbox")
_INTEGER = re.compile(r"[+-]?\d{1,40}", re.ASCII)  # int() reads any script's digits; math-verify does not


@dataclasses.dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one completion.

    Attributes:
        correct: the extracted answer is equivalent to the gold answer (False when unscorable).
        extracted: the answer string taken from the completion, or None if none was found.
        unscorable: the gold answer could not be parsed, so the sample cannot be graded.
        timed_out: grading the answer (or parsing the gold) ran out of its CPU-time budget.
    """

    correct: bool
    extracted: str | None
    unscorable: bool
    timed_out: bool = False


ANSWER_FORMS = ("any", "number")  # what an extracted answer must look like to count (answer_in_form)
_PLAIN_NUMBER = re.compile(r"^\s*[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)\s*\.?\s*$", re.ASCII)


def plain_number(extracted: str | None) -> bool:
    """The extracted answer is one number (``22``, ``22.``, ``-3``, ``4.5``, ``.5``, ``1,000``), not an
    expression (``75-51``)."""
    return extracted is not None and _PLAIN_NUMBER.match(extracted) is not None


def answer_in_form(result: GradeResult, answer_form: str) -> GradeResult:
    """``result`` counted correct only if its extracted answer has ``answer_form``: ``any`` keeps the verdict;
    ``number`` also asks for a plain number, since math-verify grades an echoed expression (SmolLM2's "The
    answer is 75-51.") equal to the gold 24."""
    if answer_form not in ANSWER_FORMS:
        raise ValueError(f"answer_form must be one of {list(ANSWER_FORMS)}, got {answer_form!r}")
    if answer_form == "any" or plain_number(result.extracted):
        return result
    return dataclasses.replace(result, correct=False)


# --------------------------------------------------------------------------------------------------
# String extraction (pure, fast, bounded)


def _unfinished_reasoning(completion: str) -> bool:
    """A ``<think>`` block was opened and never closed: the completion has no final answer."""
    return completion.rfind("<think>") > completion.rfind("</think>")


def _completion_tail(completion: str) -> str:
    cut = completion.rfind("</think>")
    tail = completion[cut + len("</think>") :] if cut >= 0 else completion
    return tail[-MAX_TAIL_CHARS:]


def _boxed_content(text: str, start: int) -> str | None:
    """Content of the boxed command starting at ``start``, or None if it does not close in time.

    Handles ``\\boxed{...}`` with nested braces (an escaped ``\\{`` or ``\\}`` is not a group brace)
    and the brace-less form ``\\boxed 5``.
    """
    j = start + 1  # skip the command name
    while j < len(text) and text[j].isalpha():
        j += 1
    if text[start:j] not in _BOXED_COMMANDS:  # e.g. \fboxsep
        return None
    if j < len(text) and text[j] == " ":  # \boxed 5
        k = j + 1
        end = k
        while (
            end < len(text) and end - k <= MAX_ANSWER_CHARS and not text[end].isspace() and text[end] != "$"
        ):
            end += 1
        content = text[k:end].rstrip(".,;")
        return content if content and end - k <= MAX_ANSWER_CHARS else None
    if j >= len(text) or text[j] != "{":
        return None
    depth = 0
    k = j
    limit = min(len(text), j + MAX_ANSWER_CHARS + 2)
    while k < limit:
        ch = text[k]
        if ch == "\\":
            k += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[j + 1 : k]
        k += 1
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` that closes within
    ``MAX_ANSWER_CHARS`` characters (earlier ones are tried if the last does not close), else None.

    >>> last_boxed(r"first \\boxed{1}, then \\boxed{\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    """
    end = len(text)
    for _ in range(MAX_BOXED_CANDIDATES):
        start = max(text.rfind(cmd, 0, end) for cmd in _BOXED_COMMANDS)
        if start < 0:
            return None
        content = _boxed_content(text, start)
        if content is not None and content.strip():
            return content.strip()
        end = start
    return None


# --------------------------------------------------------------------------------------------------
# math-verify with one time budget


class _DropTimeoutDisabledWarning(logging.Filter):
    """math-verify warns once that its own timeout is off; here the budget timer replaces it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


@functools.cache
def math_verify_once():
    """Import math-verify once, with its own signal timeouts' warning filtered out."""
    import math_verify
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_DropTimeoutDisabledWarning())
    latex_boxed = [LatexExtractionConfig(boxed_match_priority=0)]
    fallback = [LatexExtractionConfig(), ExprExtractionConfig()]
    # Warm up outside any budget: the first parse builds math-verify's regexes and the LaTeX parser
    # (~2 s on a loaded 2-core machine), which would otherwise time out the first answer graded.
    warm = math_verify.parse("\\boxed{\\frac{1}{2}}", extraction_config=latex_boxed, parsing_timeout=None)
    math_verify.verify(warm, warm, timeout_seconds=None)
    return math_verify, latex_boxed, fallback


def _parse(text: str, config) -> list:
    mv, _, _ = math_verify_once()
    return mv.parse(text, extraction_config=config, parsing_timeout=None)


# gold -> the largest budget its parse ran out of: unscorable under any budget up to that one
_gold_timeouts: dict[str, float] = {}


# A number in exponent form, as JSON writers, repr and spreadsheets lay out large and small numbers.
_EXPONENT_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def written_out(gold: str) -> str:
    """A gold (or a boxed answer) that is a number in exponent form, written out exactly (``1e+16`` -> ``10000000000000000``,
    ``1e-07`` -> ``0.0000001``); any other gold unchanged. math-verify reads ``1e+16`` as Euler's e plus 16,
    so the right answer would be graded wrong. Whatever file or reader a gold came from (``json.dumps(1e16)``,
    a Parquet float, a benchmark's boxed ``4.5e33``), the grader reads it as the number; the records keep the
    text as written, which the paper's metric gets as the released evaluation did. One too long to write out
    (``1e100000``) is no gold: the empty text, unscorable."""
    text = gold.strip()
    if not _EXPONENT_NUMBER.fullmatch(text):
        return gold
    number = Decimal(text)
    return format(number, "f") if abs(number.adjusted()) <= 4 * MAX_ANSWER_CHARS else ""


@functools.lru_cache(maxsize=4096)
def _parse_gold_cached(gold: str) -> tuple:
    _, latex_boxed, fallback = math_verify_once()
    text = written_out(gold).strip()
    if not text or len(text) > 4 * MAX_ANSWER_CHARS:
        return ()
    parsed = _parse("\\boxed{" + text + "}", latex_boxed)
    if not any(not isinstance(p, str) for p in parsed):
        parsed = _parse(text, fallback)
        # The unanchored fallback finds expressions *inside* a text: a gold it reads only in part is not
        # that gold ("sum_(k=1)^n 1/k" would become 1, "100 (i.e., all values)" 100). Whole or nothing.
        if not any(isinstance(p, str) and _same_text(p, text) for p in parsed):
            return ()
    if not any(not isinstance(p, str) for p in parsed):  # only the raw string: nothing mathematical
        return ()
    return tuple(parsed)


def _same_text(found: str, text: str) -> bool:
    """Whether math-verify's matched string is the whole gold text (spaces and ``$`` aside)."""
    squash = str.maketrans("", "", " $")
    return found.translate(squash) == text.translate(squash)


def _parse_gold(gold: str, timeout_s: float) -> tuple:
    """Parsed gold (cached); a gold answer that times out is unscorable (and in ``_gold_timeouts``)."""
    math_verify_once()  # import and warm-up are not the answer's time
    if _gold_timed_out(gold, timeout_s):
        return ()
    parsed: tuple = ()
    with TimeBudget(timeout_s, "cpu") as budget:
        parsed = _parse_gold_cached(gold)
    if budget.expired:
        _gold_timeouts[gold] = max(timeout_s, _gold_timeouts.get(gold, 0.0))
        return ()
    return parsed


def _gold_timed_out(gold: str, timeout_s: float) -> bool:
    return timeout_s <= _gold_timeouts.get(gold, 0.0)


def _extract(tail: str, boxed: str | None) -> tuple[str | None, list]:
    """(extracted answer string, parsed prediction); ``boxed`` is ``last_boxed(tail)``. Needs a budget."""
    _, latex_boxed, fallback = math_verify_once()
    if boxed is not None:  # a boxed number in exponent form is read as the number, as a gold is
        return boxed, _parse("\\boxed{" + written_out(boxed) + "}", latex_boxed)
    parsed = _parse(tail, fallback)
    if not parsed:
        return None, []
    text = parsed[-1] if isinstance(parsed[-1], str) else str(parsed[0])
    if len(text) > MAX_ANSWER_CHARS:
        # As for boxed answers: an absurdly long one is no answer. It also guards against math-verify
        # parsing only a fragment of it (a 1000-level power tower overflows sympy's recursion and comes
        # back as its first "2", which would match a gold answer of 2).
        return None, []
    return text, parsed


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _grade_here(completion: str, gold: str, timeout_s: float) -> GradeResult:
    if _unfinished_reasoning(completion):
        gold_parsed = _parse_gold(gold, timeout_s)
        return GradeResult(
            False, None, unscorable=not gold_parsed, timed_out=_gold_timed_out(gold, timeout_s)
        )
    tail = _completion_tail(completion)
    extracted = boxed = last_boxed(tail)  # cheap and bounded: known even if parsing runs out of time
    number = written_out(gold).strip()
    if boxed is not None and _INTEGER.fullmatch(boxed) and _INTEGER.fullmatch(number):
        # Fast path, same verdict as math-verify: two plain integers are equal iff their values are.
        return GradeResult(correct=int(boxed) == int(number), extracted=boxed, unscorable=False)
    mv, _, _ = math_verify_once()
    gold_parsed = _parse_gold(gold, timeout_s)
    correct = False
    with TimeBudget(timeout_s, "cpu") as budget:
        extracted, pred = _extract(tail, boxed)
        if gold_parsed and pred:
            correct = bool(mv.verify(list(gold_parsed), pred, timeout_seconds=None))
    if budget.expired:
        correct = False
    timed_out = budget.expired or _gold_timed_out(gold, timeout_s)
    return GradeResult(correct, extracted, unscorable=not gold_parsed, timed_out=timed_out)


def _check_args(completion: object, gold: object, timeout_s: object) -> None:
    """The public API checks what the CLI checks: strings to grade, and a finite budget > 0 (a zero
    budget would switch the timer off, so a pathological answer could run for ever)."""
    for name, value in (("completion", completion), ("gold", gold)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__} ({value!r:.60})")
    _check_timeout(timeout_s)


def _check_timeout(timeout_s: object) -> None:
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not (math.isfinite(timeout_s) and 0 < timeout_s <= MAX_SECONDS)
    ):
        raise ValueError(
            f"timeout_s must be a number of seconds > 0 and at most {MAX_SECONDS:g}, got {timeout_s!r}"
        )


@functools.cache
def _helper_pool() -> concurrent.futures.ProcessPoolExecutor:
    """One helper process for calls from threads other than the main one (signals need a main thread)."""
    return concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=_mp_context(), **pool_options())


def grade_detailed(completion: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> GradeResult:
    """Grade one completion against one gold answer (see the module docstring for the rules)."""
    _check_args(completion, gold, timeout_s)
    if _on_main_thread():
        return _grade_here(completion, gold, timeout_s)
    return in_helper_process(_grade_here, completion, gold, timeout_s)


def in_helper_process(func: Any, /, *args: Any) -> Any:
    """``func(*args)`` in the helper process's main thread, where a time budget works (a signal reaches
    only a main thread): for grading called from another thread."""
    return _helper_pool().submit(func, *args).result()


def grade(completion: str, gold: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """True iff the completion's final answer is equivalent to ``gold``."""
    return grade_detailed(completion, gold, timeout_s).correct


# --------------------------------------------------------------------------------------------------
# Many answers, in parallel processes


def _mp_context():
    """forkserver: workers fork from a clean server that has imported this module (and math-verify)
    once, rather than from a parent that may hold torch threads or a CUDA context. A ``__main__``
    read from stdin cannot be re-imported by a server, so then workers are plain forks."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not os.path.exists(main_file):
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["cwgrpo.grading.grading_server"])
    return ctx


def _grade_chunk(chunk: Sequence[tuple[str, str]], timeout_s: float) -> list[GradeResult]:
    """In a pool worker; one without memory exits at once, and its pool says so in one line."""
    try:
        return [_grade_here(c, g, timeout_s) for c, g in chunk]
    except MemoryError:  # too little left to send the error back or print it
        os._exit(1)


def grade_many(
    pairs: Iterable[tuple[str, str]],
    processes: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    chunksize: int = 64,
) -> list[GradeResult]:
    """Grade ``(completion, gold)`` pairs, in order, in ``processes`` worker processes.

    ``processes <= 1`` grades in this process (which must then be its main thread, or each answer
    goes through the helper process). Starting the pool costs about a second, so it is skipped when
    there are fewer pairs than one chunk.
    """
    pairs = list(pairs)
    _check_timeout(timeout_s)
    for i, (c, g) in enumerate(pairs):
        if not (isinstance(c, str) and isinstance(g, str)):
            raise TypeError(
                f"pair {i}: completion and gold must be str, got {type(c).__name__}, {type(g).__name__}"
            )
    if processes <= 1 or len(pairs) <= chunksize:
        if _on_main_thread():
            return [_grade_here(c, g, timeout_s) for c, g in pairs]
        return [grade_detailed(c, g, timeout_s) for c, g in pairs]
    chunks = [pairs[i : i + chunksize] for i in range(0, len(pairs), chunksize)]
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=processes, mp_context=_mp_context(), **pool_options()
    )
    try:
        with pool:
            results = pool.map(_grade_chunk, chunks, [timeout_s] * len(chunks))
            return [r for chunk in results for r in chunk]
    except (BrokenProcessPool, EOFError) as err:  # EOFError: the forkserver died starting a worker
        raise MemoryError(
            f"a grading worker process ended abruptly, most often for lack of memory ({processes} processes)"
        ) from err
