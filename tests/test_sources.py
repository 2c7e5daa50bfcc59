"""The sources page, its registry (course_utils.sources) and the lessons stay in step.

Every lesson cell that quotes or paraphrases a source claim carries the cell tag ``source-claim-<id>`` of a
registered claim. These tests fail when a registered claim's tag is gone from a lesson it names, when a
notebook carries a tag, or a ``check_claim`` call, that the registry does not hold, and when a cell names a
source ("source 001", "Sources 000, 001 and 004") without a tag of one of that source's claims.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from course_utils.course import LESSON_FILE, Lesson, read_course
from course_utils.sources import (
    CLAIMS,
    HOW,
    MARKS,
    PAGE,
    SOURCES,
    TAG_PREFIX,
    Claim,
    claims_markdown,
    mentioned_sources,
    sources_markdown,
)

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
PAGE_PATH = FOLDER / PAGE
LESSONS = sorted(p for p in FOLDER.glob("*.ipynb") if LESSON_FILE.match(p.name))
#: The source texts, where this checkout sits beside them (not in a plain clone).
SEEDS = next((d for d in (ROOT / "shared" / "seeds", ROOT.parent / "shared" / "seeds") if d.is_dir()), None)

#: Cells that name a source without quoting or paraphrasing a claim of it: (notebook, cell id) -> why.
#: Keep it short; a cell that shows a claim gets the claim's tag instead.
NAMES_WITHOUT_A_CLAIM = {
    ("sources", "1b6c5657"): "the page's introduction lists sources 000 to 004",
    ("sources", "9edeac64"): "says which sources state no number, before the tables that list their claims",
    ("05b", "9046cf2d"): "says where the masked_fill(mask == 0, -1e9) idiom comes from; the exercise checks "
                         "the idiom, not source 002",
}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _outputs(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        for mime in ("text/plain", "text/markdown"):
            parts.append("".join(out.get("data", {}).get(mime, "")))
    return "\n".join(parts)


def _name(path: Path) -> str:
    """A lesson's number ("03"), or "sources" for the page."""
    match = LESSON_FILE.match(path.name)
    return match.group(1) if match else path.stem


#: Every notebook that may show a claim, by name: the lessons and the sources page.
NOTEBOOKS = {_name(p): _load(p) for p in LESSONS + [PAGE_PATH]}
BY_ID = {c.id: c for c in CLAIMS}


def _check_claim_calls(source: str) -> list[tuple[str, str]]:
    """(label, stated) of every check_claim(...) call in a code cell; both must be string literals."""
    code = "\n".join("" if re.match(r"\s*[%!]", line) else line for line in source.splitlines())
    calls = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "check_claim":
                label, stated = node.args[0], node.args[1]
                assert isinstance(label, ast.Constant) and isinstance(stated, ast.Constant), (
                    f"check_claim({ast.unparse(label)}, {ast.unparse(stated)}, ...): give the label and the stated "
                    "text as string literals, so that the sources page can list them")
                calls.append((label.value, stated.value))
    return calls


def _lesson_checks() -> dict[tuple[str, str], dict[str, str]]:
    """Every check_claim call in a lesson notebook: (label, stated) -> {lesson: the verdict mark it stored}."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for path in LESSONS:
        lesson = _name(path)
        for cell in NOTEBOOKS[lesson]["cells"]:
            if cell["cell_type"] != "code":
                continue
            printed = _outputs(cell)
            for label, stated in _check_claim_calls(_source(cell)):
                match = re.search(rf"^([✓✗]) {re.escape(label)}: the source states {re.escape(stated)};", printed, re.MULTILINE)
                assert match, f"{path.name}: no stored verdict for check_claim({label!r}, {stated!r}): re-execute it"
                found.setdefault((label, stated), {})[lesson] = match.group(1)
    return found


LESSON_CHECKS = _lesson_checks()
REGISTRY = {(c.label, c.stated): c for c in CLAIMS if c.how == "check_claim"}


# --- The markers: each place that shows a claim carries its tag ------------------------------------------------


def _claim_tags(cell: dict) -> list[str]:
    """The ids of the source-claim tags of a cell."""
    return [t[len(TAG_PREFIX):] for t in cell.get("metadata", {}).get("tags", []) if t.startswith(TAG_PREFIX)]


def _tagged(notebooks: dict[str, dict]) -> dict[str, set[str]]:
    """Claim id -> the notebooks with a cell tagged with it."""
    found: dict[str, set[str]] = {}
    for name, nb in notebooks.items():
        for cell in nb["cells"]:
            for claim_id in _claim_tags(cell):
                found.setdefault(claim_id, set()).add(name)
    return found


def marker_problems(notebooks: dict[str, dict]) -> list[str]:
    """Everything that breaks the rule "every place that shows a source claim carries a registered claim's tag"."""
    problems = []
    tagged = _tagged(notebooks)
    for claim_id in sorted(set(tagged) - set(BY_ID)):
        problems.append(f"{sorted(tagged[claim_id])}: tag {TAG_PREFIX}{claim_id} names no claim of "
                        "course_utils/sources.py: register the claim, or correct the tag")
    for claim in CLAIMS:
        lessons = tagged.get(claim.id, set()) - {"sources"}
        for lesson in sorted(set(claim.lessons) - lessons):
            problems.append(f"lesson {lesson}: no cell carries {claim.tag}, yet the registry says lesson {lesson} "
                            f"checks it: tag the cell that shows the claim, or remove {lesson} from its lessons")
        for lesson in sorted(lessons - set(claim.lessons)):
            problems.append(f"lesson {lesson}: a cell carries {claim.tag}, but the claim's lessons are "
                            f"{list(claim.lessons)}: add {lesson} to them in course_utils/sources.py")
        if not claim.lessons and "sources" not in tagged.get(claim.id, set()):
            problems.append(f"{claim.id}: no lesson checks it, so the sources page must show it: tag its cells there")
    for name, nb in notebooks.items():
        for index, cell in enumerate(nb["cells"]):
            if (name, cell.get("id")) in NAMES_WITHOUT_A_CLAIM:
                continue
            sources_tagged = {BY_ID[t].source for t in _claim_tags(cell) if t in BY_ID}
            for number in sorted(mentioned_sources(_source(cell)) - sources_tagged):
                problems.append(f"{name}, cell {index} (id {cell.get('id')}): names source {number} without the tag of "
                                f"a claim of source {number}: register the claim in course_utils/sources.py and tag "
                                f"the cell {TAG_PREFIX}<its id>")
            for label, stated in (_check_claim_calls(_source(cell)) if cell["cell_type"] == "code" else []):
                claim = REGISTRY.get((label, stated))
                if claim is not None and claim.id not in _claim_tags(cell):
                    problems.append(f"{name}, cell {index}: check_claim({label!r}, ...) in a cell without its tag "
                                    f"{claim.tag}")
    return problems


def test_every_place_that_shows_a_source_claim_carries_a_registered_claims_tag():
    problems = marker_problems(NOTEBOOKS)
    assert not problems, "\n".join(problems)


def test_a_claim_removed_from_a_lesson_fails_the_markers():
    notebooks = copy.deepcopy(NOTEBOOKS)
    claim = BY_ID["001-no-exact-zero"]
    for cell in notebooks["05"]["cells"]:  # lesson 05 drops the claim: its cells lose their tags
        tags = cell.get("metadata", {}).get("tags", [])
        if claim.tag in tags:
            tags.remove(claim.tag)
    problems = marker_problems(notebooks)
    assert any(p.startswith(f"lesson 05: no cell carries {claim.tag}") for p in problems), problems
    assert any("names source 001 without the tag" for p in problems), "the cells still quote the source"


def test_an_unregistered_claim_added_to_a_lesson_fails_the_markers():
    notebooks = copy.deepcopy(NOTEBOOKS)
    quoted = {"cell_type": "markdown", "id": "added01", "metadata": {},
              "source": ['Source 003 says temperature "controls focus sharpness"; that is right.']}
    tagged = copy.deepcopy(quoted) | {"id": "added02", "metadata": {"tags": [TAG_PREFIX + "003-focus-sharpness"]}}
    notebooks["01"]["cells"] += [quoted, tagged]
    problems = marker_problems(notebooks)
    assert any("cell" in p and "(id added01): names source 003 without the tag" in p for p in problems), problems
    assert any("tag source-claim-003-focus-sharpness names no claim" in p for p in problems), problems


def test_claim_ids_and_tags_are_unique():
    assert len(BY_ID) == len(CLAIMS), "two claims share an id"
    assert len({c.tag for c in CLAIMS}) == len(CLAIMS)


def test_the_list_of_cells_that_name_a_source_without_a_claim_is_short_and_current():
    assert len(NAMES_WITHOUT_A_CLAIM) <= 5
    for (name, cell_id), why in NAMES_WITHOUT_A_CLAIM.items():
        (cell,) = [c for c in NOTEBOOKS[name]["cells"] if c.get("id") == cell_id]
        assert mentioned_sources(_source(cell)), f"{name} cell {cell_id} names no source any more: drop it from the list"
        assert not _claim_tags(cell), f"{name} cell {cell_id} carries a claim's tag: drop it from the list"
        assert why


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.how == "conclude"], ids=lambda c: c.id)
def test_a_claim_checked_with_conclude_has_a_tagged_conclude_line_where_it_is_checked(claim: Claim):
    for name in claim.lessons or ("sources",):
        code = [_source(c) for c in NOTEBOOKS[name]["cells"] if c["cell_type"] == "code" and claim.id in _claim_tags(c)]
        assert any("conclude(" in source for source in code), f"{name}: no code cell tagged {claim.tag} calls conclude"


def _section_tags(nb: dict, heading: str) -> set[str]:
    """The claim ids tagged in the cells of the page's section ``## heading``, up to the next ``##`` heading."""
    found, inside = set(), False
    for cell in nb["cells"]:
        h2 = re.findall(r"^## (.+?)\s*$", _source(cell) if cell["cell_type"] == "markdown" else "", re.MULTILINE)
        if h2:
            inside = h2[-1] == heading
        if inside:
            found |= set(_claim_tags(cell))
    return found


def test_claims_no_lesson_checks_lists_exactly_the_claims_no_lesson_checks():
    unchecked = {c.id for c in CLAIMS if not c.lessons}
    assert unchecked, "the page's section 'Claims no lesson checks' answers at least one claim"
    assert _section_tags(NOTEBOOKS["sources"], "Claims no lesson checks") == unchecked


# --- The check_claim calls: the same claims, with the same verdicts ---------------------------------------------


def test_the_lessons_check_claims():
    assert len(LESSON_CHECKS) >= 20, "the lessons' check_claim calls were not found"


def test_every_check_claim_in_a_lesson_is_in_the_registry_with_its_lessons():
    missing = {key: sorted(lessons) for key, lessons in LESSON_CHECKS.items()
               if key not in REGISTRY or set(REGISTRY[key].lessons) != set(lessons)}
    assert not missing, f"add these to course_utils/sources.py (label, stated: lessons): {missing}"


def test_every_registry_claim_is_checked_by_the_lessons_it_names():
    stale = [key for key in REGISTRY if key not in LESSON_CHECKS]
    assert not stale, f"no lesson checks these any more; remove them from course_utils/sources.py: {stale}"
    assert len(REGISTRY) == sum(c.how == "check_claim" for c in CLAIMS), "a claim is listed twice"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.how == "check_claim"], ids=lambda c: c.id)
def test_each_verdict_is_computed_and_is_the_lessons_verdict(claim: Claim):
    values = np.atleast_1d(np.asarray(claim.compute(), dtype=np.float64))
    assert np.isfinite(values).all()
    line = claim.verdict()
    assert line.startswith(("✓ ", "✗ ")) and f"{claim.label}: the source states {claim.stated}; computed " in line
    stored = LESSON_CHECKS.get((claim.label, claim.stated), {})
    for lesson, mark in stored.items():
        assert line[0] == mark, f"lesson {lesson} printed {mark} for {claim.label!r}, the registry computes {line}"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.how != "check_claim"], ids=lambda c: c.id)
def test_each_verdict_in_words_is_computed_now_and_carries_its_mark(claim: Claim):
    line = claim.verdict()
    assert claim.how in HOW and claim.mark in MARKS
    assert line.startswith(f"{claim.mark} {claim.what}: ") and len(line) > len(claim.mark) + len(claim.what) + 12
    assert "\n" not in line, "a verdict is one line of a Markdown table"
    with pytest.raises(ValueError, match="not check_claim"):
        claim.check()


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_each_claim_names_its_source_and_lessons_that_exist(claim: Claim):
    course = read_course(FOLDER)
    assert claim.source in SOURCES
    if claim.source.isdigit():  # the five source texts: ids and labels start with the source's number
        assert claim.id.startswith(f"{claim.source}-")
        if claim.how == "check_claim":
            assert claim.label.startswith(f"source {claim.source}, ")
    assert all(lesson in course for lesson in claim.lessons)


@pytest.mark.skipif(SEEDS is None, reason="the source texts (shared/seeds/) are not beside this checkout")
@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.source.isdigit()], ids=lambda c: c.id)
def test_each_quote_is_the_sources_own_words(claim: Claim):
    def plain(text: str) -> str:  # without LaTeX and Markdown marks, one space for any whitespace
        return " ".join(re.sub(r"[$*]", "", text).split())

    (path,) = SEEDS.glob(f"{claim.source}_*.txt")
    text = plain(path.read_text(encoding="utf-8"))
    for piece in claim.quote.split(" … "):
        assert plain(piece) in text, f"source {claim.source} does not say {piece!r}"


# --- The page ---------------------------------------------------------------------------------------------------


def test_the_page_shows_every_claim_with_its_verdict_as_computed_now():
    nb = NOTEBOOKS["sources"]
    shown = "\n".join(_outputs(c) for c in nb["cells"] if c["cell_type"] == "code")
    course = read_course(FOLDER)
    assert sources_markdown() in shown, "re-execute notebooks/sources.ipynb"
    assert {c.source for c in CLAIMS} == set(SOURCES), "every source has a claim the course checks"
    for source in SOURCES:
        assert claims_markdown(source, course) in shown, f"the page's table of source {source} is out of date"
    assert "check_claim(" not in "".join(_source(c) for c in nb["cells"]), (
        "the page shows the registry's claims; a check_claim call of its own would count as a lesson's")


def test_each_row_links_the_lessons_that_check_the_claim_with_a_section():
    course = read_course(FOLDER)
    for source in SOURCES:
        table = claims_markdown(source, course).splitlines()[2:]
        for claim, row in zip([c for c in CLAIMS if c.source == source], table):
            where = row.rsplit(" | ", 1)[1]
            for lesson in claim.lessons:
                assert f"[lesson {lesson}]({course[lesson].path.name}), § " in where, (claim.id, where)
            if not claim.lessons:
                assert where.startswith("this page, § Claims no lesson checks"), (claim.id, where)


def test_every_link_on_the_page_resolves_to_a_notebook():
    nb = NOTEBOOKS["sources"]
    texts = [_source(c) if c["cell_type"] == "markdown" else _outputs(c) for c in nb["cells"]]
    targets = [t for text in texts for t in re.findall(r"\]\(([^)#\s]+\.ipynb)", text)]
    linked = {LESSON_FILE.match(t).group(1) for t in targets if LESSON_FILE.match(t)}
    assert {lesson for claim in CLAIMS for lesson in claim.lessons} | {"08"} <= linked
    missing = [t for t in targets if not (FOLDER / t).is_file()]
    assert not missing, f"the sources page links to missing notebooks: {missing}"


def test_the_page_is_a_page_not_a_lesson():
    lesson = Lesson.from_metadata(NOTEBOOKS["sources"]["metadata"]["course"], PAGE_PATH)
    assert lesson.page and lesson.lesson == "sources"
    assert "sources" not in read_course(FOLDER)


# Bad arguments name themselves.


def test_a_claim_that_is_not_well_formed_is_refused():
    idea = dict(how="prose", what="x", mark="✓", words="x")
    with pytest.raises(ValueError, match="source"):
        Claim("005-x", "005", "x", ("01",), **idea)
    with pytest.raises(ValueError, match="id"):
        Claim("Bad id", "001", "x", ("01",), **idea)
    with pytest.raises(ValueError, match="id"):
        Claim("002-x", "001", "x", ("01",), **idea)
    with pytest.raises(ValueError, match="how"):
        Claim("001-x", "001", "x", ("01",), **(idea | {"how": "by eye"}))
    with pytest.raises(TypeError, match="mark"):
        Claim("001-x", "001", "x", ("01",), **(idea | {"mark": "?"}))
    with pytest.raises(TypeError, match="lessons"):
        Claim("001-x", "001", "x", ["01"], **idea)
    with pytest.raises(TypeError, match="compute"):
        Claim("001-x", "001", "x", ("01",), "check_claim", label="source 001, x", stated="1")
    with pytest.raises(TypeError, match="no label"):
        Claim("001-x", "001", "x", ("01",), **idea, label="source 001, x")


def test_a_table_needs_a_known_source_every_lesson_it_links_and_a_tagged_cell():
    course = read_course(FOLDER)
    with pytest.raises(ValueError, match="source"):
        claims_markdown("005", course)
    with pytest.raises(ValueError, match="source '003' has no claim"):
        claims_markdown("003", course, claims=())
    with pytest.raises(ValueError, match="lesson"):
        claims_markdown("000", {})
    untagged = Claim("001-nowhere", "001", "x", ("01",), "prose", what="x", mark="✓", words="x")
    with pytest.raises(ValueError, match="no cell tagged 'source-claim-001-nowhere'"):
        claims_markdown("001", course, claims=(untagged,))
