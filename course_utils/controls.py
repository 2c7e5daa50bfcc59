"""Two small widgets a screen reader can use: a slider over a list of values, and a live region.

ipywidgets' sliders draw their handle with noUiSlider, a ``<div role="slider">`` that its visible label does not
name (axe's ``aria-input-field-name``) and whose ``aria-valuetext`` is the internal value (``-2`` where a log
slider shows T = 0.01). ipywidgets passes noUiSlider no option to change either. And an ``ipywidgets.HTML`` whose
value is a ``role="status"`` region replaces that region at each change, where screen readers announce only changes
inside a region already in the page. Both are fixed here with anywidget, the well-kept way to write a widget in a
few lines of JavaScript, shipped with the package (no build step, no network): the slider is a native
``<input type="range">`` with a ``<label for>`` (its accessible name), an ``aria-valuetext`` equal to the readout
beside it, one step per arrow key, Page Up/Down and Home/End; the live region is made once and only its text changes.
"""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

__all__ = ["LiveText", "StepSlider"]

_SLIDER_ESM = """
let made = 0;
function render({ model, el }) {
  const id = `course-step-slider-${++made}-${Math.random().toString(36).slice(2, 8)}`;
  const row = document.createElement("div");
  row.className = "course-slider";
  const label = document.createElement("label");
  label.htmlFor = id;
  const input = document.createElement("input");
  input.type = "range";
  input.id = id;
  input.min = "0";
  input.step = "1";
  const output = document.createElement("output");
  output.htmlFor = id;
  output.setAttribute("aria-hidden", "true");  // the slider says it already, as its value text
  const show = (text) => { input.setAttribute("aria-valuetext", text); output.textContent = text; };
  const sync = () => {
    label.textContent = model.get("description");
    input.max = String(model.get("labels").length - 1);
    input.value = String(model.get("index"));
    show(model.get("readout"));
  };
  // The keys the slider moves with are its own: JupyterLab's notebook would take arrows and Home/End for its cells.
  input.setAttribute("data-lm-suppress-shortcuts", "true");
  const keys = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "PageUp", "PageDown", "Home", "End"];
  input.addEventListener("keydown", (event) => { if (keys.includes(event.key)) event.stopPropagation(); });
  input.addEventListener("input", () => {
    const index = Number(input.value);
    show(model.get("labels")[index]);  // at once, before the kernel answers
    model.set("index", index);
    model.save_changes();
  });
  for (const name of ["description", "labels", "index", "readout"]) model.on(`change:${name}`, sync);
  sync();
  row.append(label, input, output);
  el.append(row);
  return () => { for (const name of ["description", "labels", "index", "readout"]) model.off(`change:${name}`, sync); };
}
export default { render };
"""

_SLIDER_CSS = """
.course-slider { display: flex; align-items: center; gap: 0.75em; width: 560px; max-width: 100%;
  font-size: var(--jp-widgets-font-size, inherit); color: var(--jp-widgets-label-color, inherit); }
.course-slider label { flex: 0 0 auto; }
.course-slider input[type="range"] { flex: 1 1 auto; min-width: 6em; margin: 0.4em 0;
  accent-color: var(--jp-brand-color1, #1976d2); }
.course-slider output { flex: 0 0 auto; min-width: 4em; font-variant-numeric: tabular-nums; }
"""

_LIVE_ESM = """
function render({ model, el }) {
  const region = document.createElement("div");
  region.className = "course-live";
  region.setAttribute("role", "status");
  region.setAttribute("aria-live", "polite");
  region.setAttribute("aria-atomic", "true");
  const sync = () => { region.textContent = model.get("text"); };
  model.on("change:text", sync);
  sync();
  el.append(region);
  return () => model.off("change:text", sync);
}
export default { render };
"""

_LIVE_CSS = """
.course-live { line-height: 1.4; color: var(--jp-content-font-color1, inherit); }
"""


def _real(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    number = float(value)
    if not np.isfinite(number):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return number


class StepSlider(anywidget.AnyWidget):
    """A slider over a list of values, named by its label, whose value text is its readout.

    In the browser it is an ``<input type="range">`` over the positions of
    `values`: one arrow key moves one step, Page Up/Down a tenth of the way
    and Home/End to either end, and a screen reader reads its `description`
    as its name and the readout beside it as its value.

    Parameters
    ----------
    values : sequence of real numbers
        The values the slider steps through, increasing; at least two.
    value : real number
        Where it starts. A value between two steps is kept as given (Python
        may set any value in range) and the handle sits at the nearest step.
    description : str
        The label before the slider, and its accessible name.
    readout : str, default "g"
        The format spec of the readout (``format(value, readout)``).

    Attributes
    ----------
    values : tuple
        The steps, as given.
    value
        The value, as given or as stepped to; ``observe(..., names="value")`` follows it.
    readout : str
        The value as the readout shows it.
    index : int
        The step the handle is at.
    labels : list of str
        The readout of each step.

    Raises
    ------
    TypeError
        If `values` or `value` holds something other than real numbers, or `description` or `readout` is not a str.
    ValueError
        If `values` has fewer than two entries, is not increasing, or `value` lies outside them.

    Examples
    --------
    >>> slider = StepSlider([0.01, 0.1, 1.0, 10.0], value=1.0, description="T", readout=".2f")
    >>> slider.index, slider.readout
    (2, '1.00')
    >>> slider.index = 0  # as the browser does when the handle moves
    >>> slider.value, slider.readout
    (0.01, '0.01')
    >>> slider.value = 0.5  # between two steps: kept, the handle at the nearest
    >>> slider.index, slider.readout
    (1, '0.50')
    """

    _esm = _SLIDER_ESM
    _css = _SLIDER_CSS
    description = traitlets.Unicode("").tag(sync=True)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    readout = traitlets.Unicode("").tag(sync=True)
    value = traitlets.Any()

    def __init__(self, values: Sequence[float], *, value: float, description: str, readout: str = "g") -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            raise TypeError(f"values must be a sequence of real numbers; got {type(values).__name__}")
        steps = [_real(v, "values") for v in values]
        if len(steps) < 2 or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"values must hold at least two numbers, increasing; got {list(values)!r}")
        if not isinstance(description, str):
            raise TypeError(f"description must be a str; got {type(description).__name__}")
        if not isinstance(readout, str):
            raise TypeError(f"readout must be a format spec (a str), such as '.2f'; got {type(readout).__name__}")
        self._values = [v.item() if isinstance(v, np.generic) else v for v in values]
        self._steps = np.array(steps)
        self._format = readout
        labels = [format(v, readout) for v in self._values]
        super().__init__(description=description, labels=labels)
        self.value = value

    @traitlets.validate("value")
    def _check_value(self, proposal: dict[str, Any]) -> Any:
        number = _real(proposal["value"], "value")
        if not self._steps[0] <= number <= self._steps[-1]:
            raise ValueError(f"value must lie in [{self._values[0]}, {self._values[-1]}], the slider's range; "
                             f"got {proposal['value']!r}")
        return proposal["value"]

    @property
    def values(self) -> tuple[Any, ...]:
        """The values the slider steps through."""
        return tuple(self._values)

    def _nearest(self, value: Any) -> int:
        return int(np.argmin(np.abs(self._steps - float(value))))

    @traitlets.observe("value")
    def _follow_value(self, change: dict[str, Any]) -> None:
        with self.hold_sync():  # the step and the readout in one message
            self.index = self._nearest(change["new"])
            self.readout = format(change["new"], self._format)

    @traitlets.validate("index")
    def _check_index(self, proposal: dict[str, Any]) -> int:
        if not 0 <= proposal["value"] < len(self._values):
            raise ValueError(f"index must lie in [0, {len(self._values) - 1}]; got {proposal['value']}")
        return proposal["value"]

    @traitlets.observe("index")
    def _follow_index(self, change: dict[str, Any]) -> None:
        if self._nearest(self.value) != change["new"]:  # moved in the browser (or by index): step to it
            self.value = self._values[change["new"]]


class LiveText(anywidget.AnyWidget):
    """A polite status region, made once, whose text a screen reader announces each time it changes.

    Examples
    --------
    >>> live = LiveText(text="At T = 1, the weights are 0.09, 0.24 and 0.67.")
    >>> live.text = "At T = 0.1, the largest weight is 1.00."  # announced
    """

    _esm = _LIVE_ESM
    _css = _LIVE_CSS
    text = traitlets.Unicode("").tag(sync=True)
