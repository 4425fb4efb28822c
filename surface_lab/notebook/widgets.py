"""`ReplayWidget`: a thin ipywidgets shell over `Replay`. Controls only move the slider;
the slider's observer seeks the stepper and renders HTML and a PNG. No logic lives in a
callback, so tests drive it headless by setting `slider.value` and reading `html.value`."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from .plots import figure_png, plot_surface_size
from .render import step_html
from .replay import Replay

__all__ = ["ReplayWidget"]


class ReplayWidget:
    """Step through a log: Play, a slider, back/step buttons, the model's view as HTML and
    the surface-size figure with the replay position marked.

    Args:
        source: anything `Replay` accepts, or a `Replay`.
        start: the step (event seq) to show first; the end of the log by default.
        figure: draw the figure (turn off for very large logs or quick tests).
        interval: milliseconds per step while playing.
    """

    def __init__(self, source: Any, *, start: int | None = None, figure: bool = True,
                 interval: int = 400) -> None:
        self.replay = source if isinstance(source, Replay) else Replay(source)
        last = len(self.replay) - 1
        value = last if start is None else start
        self.play = widgets.Play(min=-1, max=last, value=value, interval=interval,
                                 description="play")
        self.slider = widgets.IntSlider(min=-1, max=last, value=value,
                                        description="step", continuous_update=False,
                                        layout=widgets.Layout(width="70%"))
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.back_button = widgets.Button(description="◀ back", layout={"width": "90px"})
        self.step_button = widgets.Button(description="step ▶", layout={"width": "90px"})
        self.back_button.on_click(lambda _: self._move(-1))
        self.step_button.on_click(lambda _: self._move(+1))
        self.html = widgets.HTML()
        self.image = widgets.Image(format="png", layout={"max_width": "980px"})
        self.figure = figure
        self.slider.observe(self._render, names="value")
        self.view = widgets.VBox([
            widgets.HBox([self.play, self.back_button, self.step_button, self.slider]),
            self.image, self.html])
        self._render()

    def _move(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, -1), self.slider.max)

    def _render(self, change: Any = None) -> None:
        self.replay.seek(self.slider.value)
        self.html.value = step_html(self.replay)
        if self.figure and len(self.replay):
            self.image.value = figure_png(plot_surface_size, self.replay.log,
                                          marker=self.replay.seq, size=(10, 2.6), dpi=90)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)
