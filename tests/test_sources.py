"""The sources page, its registry (course_utils.sources) and the lessons' check_claim calls stay in step."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from course_utils.course import LESSON_FILE, Lesson, read_course
from course_utils.sources import CLAIMS, SOURCES, Claim, claims_markdown, sources_markdown

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
PAGE = FOLDER / "sources.ipynb"
LESSONS = sorted(p for p in FOLDER.glob("*.ipynb") if LESSON_FILE.match(p.name))
#: The source texts, where this checkout sits beside them (not in a plain clone).
SEEDS = next((d for d in (ROOT / "shared" / "seeds", ROOT.parent / "shared" / "seeds") if d.is_dir()), None)


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
        lesson = LESSON_FILE.match(path.name).group(1)
        for cell in _load(path)["cells"]:
            if cell["cell_type"] != "code":
                continue
            printed = _outputs(cell)
            for label, stated in _check_claim_calls(_source(cell)):
                match = re.search(rf"^([✓✗]) {re.escape(label)}: the source states {re.escape(stated)};", printed, re.MULTILINE)
                assert match, f"{path.name}: no stored verdict for check_claim({label!r}, {stated!r}): re-execute it"
                found.setdefault((label, stated), {})[lesson] = match.group(1)
    return found


LESSON_CHECKS = _lesson_checks()
REGISTRY = {(c.label, c.stated): c for c in CLAIMS}


def test_the_lessons_check_claims():
    assert len(LESSON_CHECKS) >= 20, "the lessons' check_claim calls were not found"


def test_every_check_claim_in_a_lesson_is_in_the_registry_with_its_lessons():
    missing = {key: sorted(lessons) for key, lessons in LESSON_CHECKS.items()
               if key not in REGISTRY or set(REGISTRY[key].lessons) != set(lessons)}
    assert not missing, f"add these to course_utils/sources.py (label, stated: lessons): {missing}"


def test_every_registry_claim_is_checked_by_the_lessons_it_names():
    stale = [key for key in REGISTRY if key not in LESSON_CHECKS]
    assert not stale, f"no lesson checks these any more; remove them from course_utils/sources.py: {stale}"
    assert len(REGISTRY) == len(CLAIMS), "a claim is listed twice in course_utils/sources.py"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.label for c in CLAIMS])
def test_each_verdict_is_computed_and_is_the_lessons_verdict(claim: Claim):
    values = np.atleast_1d(np.asarray(claim.compute(), dtype=np.float64))
    assert np.isfinite(values).all()
    line = claim.verdict()
    assert line.startswith(("✓ ", "✗ ")) and f"{claim.label}: the source states {claim.stated}; computed " in line
    stored = LESSON_CHECKS.get((claim.label, claim.stated), {})
    for lesson, mark in stored.items():
        assert line[0] == mark, f"lesson {lesson} printed {mark} for {claim.label!r}, the registry computes {line}"


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.label for c in CLAIMS])
def test_each_claim_names_its_source_and_lessons_that_exist(claim: Claim):
    course = read_course(FOLDER)
    assert claim.source in SOURCES
    if claim.source.isdigit():  # the five source texts: the lessons' labels start with the source's id
        assert claim.label.startswith(f"source {claim.source}, ")
    assert all(lesson in course for lesson in claim.lessons)


@pytest.mark.skipif(SEEDS is None, reason="the source texts (shared/seeds/) are not beside this checkout")
@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.source.isdigit()], ids=lambda c: c.label)
def test_each_quote_is_the_sources_own_words(claim: Claim):
    def plain(text: str) -> str:  # without LaTeX and Markdown marks, one space for any whitespace
        return " ".join(re.sub(r"[$*]", "", text).split())

    (path,) = SEEDS.glob(f"{claim.source}_*.txt")
    text = plain(path.read_text(encoding="utf-8"))
    for piece in claim.quote.split(" … "):
        assert plain(piece) in text, f"source {claim.source} does not say {piece!r}"


def test_the_page_shows_every_claim_with_its_verdict_as_computed_now():
    nb = _load(PAGE)
    shown = "\n".join(_outputs(c) for c in nb["cells"] if c["cell_type"] == "code")
    course = read_course(FOLDER)
    assert sources_markdown() in shown, "re-execute notebooks/sources.ipynb"
    for source in sorted({c.source for c in CLAIMS}):
        assert claims_markdown(source, course) in shown, f"the page's table of source {source} is out of date"
    assert "check_claim(" not in "".join(_source(c) for c in nb["cells"]), (
        "the page shows the registry's claims; a check_claim call of its own would count as a lesson's")


def test_every_link_on_the_page_resolves_to_a_notebook():
    nb = _load(PAGE)
    texts = [_source(c) if c["cell_type"] == "markdown" else _outputs(c) for c in nb["cells"]]
    targets = [t for text in texts for t in re.findall(r"\]\(([^)#\s]+\.ipynb)", text)]
    linked = {LESSON_FILE.match(t).group(1) for t in targets if LESSON_FILE.match(t)}
    assert {lesson for claim in CLAIMS for lesson in claim.lessons} | {"08"} <= linked
    missing = [t for t in targets if not (FOLDER / t).is_file()]
    assert not missing, f"the sources page links to missing notebooks: {missing}"


def test_the_page_is_a_page_not_a_lesson():
    lesson = Lesson.from_metadata(_load(PAGE)["metadata"]["course"], PAGE)
    assert lesson.page and lesson.lesson == "sources"
    assert "sources" not in read_course(FOLDER)


# Bad arguments name themselves.


def test_a_claim_of_an_unknown_source_is_refused():
    with pytest.raises(ValueError, match="source"):
        Claim("005", "source 005, x", "1", "x", ("01",), lambda: 1.0)
    with pytest.raises(TypeError, match="lessons"):
        Claim("000", "source 000, x", "1", "x", (), lambda: 1.0)


def test_a_table_needs_a_known_source_and_every_lesson_it_links():
    course = read_course(FOLDER)
    with pytest.raises(ValueError, match="source"):
        claims_markdown("005", course)
    with pytest.raises(ValueError, match="source '003' has no claim"):
        claims_markdown("003", course)
    with pytest.raises(ValueError, match="lesson"):
        claims_markdown("000", {})
