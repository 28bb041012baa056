"""The environment engineer: reads how the policy behaved and writes the next stage's config.

Pieces, one file each: :mod:`engineer.evidence` (replays -> the typed evidence: failure summary with per-size
figures), :mod:`engineer.context` (evidence and history -> named, switchable sections as text and data), :mod:`engineer.prompt`
(the LLM's prompt), :mod:`engineer.proposal` (answer -> repaired, validated config, or the fallback),
:mod:`engineer.decision` (the record of each decision), one module per engineer (:mod:`engineer.rule`,
:mod:`engineer.gap`, :mod:`engineer.llm`, ...; :mod:`engineer.bands` and :mod:`engineer.material` serve some of
them), :mod:`engineer.engineers` (the registry ``ENGINEERS``, which names them all) and :mod:`engineer.cli`
(``mapf-lake engineer``).

Typical use::

    context = build_context(evidence, config, history, sections=("failures", "behavior"))
    decision = make_engineer("rule").propose(context, config, seed=stage)
    next_config = decision.config          # always valid; the previous config when the proposal was rejected
    record = decision.to_dict()            # raw answer, proposal, repairs, diff, reason
"""

from engineer.context import CONTEXT_SECTIONS, EngineerContext, HistoryEntry, build_context, parse_sections
from engineer.decision import EngineerDecision
from engineer.engineers import ENGINEERS, Engineer, make_engineer
from engineer.evidence import Evidence, StageEvidence, collect_evidence, summarize_episodes
from engineer.proposal import MAX_ANSWER_CHARS, decide_from_answer, extract_proposal, repair_proposal

__all__ = [
    "CONTEXT_SECTIONS",
    "ENGINEERS",
    "Engineer",
    "EngineerContext",
    "EngineerDecision",
    "Evidence",
    "HistoryEntry",
    "MAX_ANSWER_CHARS",
    "StageEvidence",
    "build_context",
    "collect_evidence",
    "decide_from_answer",
    "extract_proposal",
    "make_engineer",
    "parse_sections",
    "repair_proposal",
    "summarize_episodes",
]
