"""`ReplayWidget`: an ipywidgets `VBox` over the pure `Replay` stepper. Controls only move
the slider; the slider's observer seeks the stepper and renders HTML and a PNG. No logic
lives in a callback, so tests drive it headless by setting `slider.value` and reading
`html.value`."""

from __future__ import annotations

import base64
import io
import warnings
from typing import Any, cast

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from ..analysis.source import LogData
from .plots import plot_surface_size
from .render import step_html
from .replay import Replay

__all__ = ["ReplayWidget", "SurfaceSizeFigure"]

try:  # the frames and plots work without ipywidgets; only the widget needs it
    import ipywidgets as widgets
except ImportError:  # (tests/test_layers.py blocks it in a fresh interpreter)
    widgets = None


class SurfaceSizeFigure:
    """The surface-size figure with a movable replay-position line. The figure is drawn
    once; moving the line restores the saved background and redraws the line alone
    (matplotlib blitting), so a step costs a few milliseconds whatever the log's length.

    Args:
        log: the log to draw.
        size: figure size in inches.
        dpi: dots per inch of the PNG.
    """

    def __init__(self, log: LogData, *, size: tuple[float, float] = (10, 2.6),
                 dpi: int = 90) -> None:
        self.figure = Figure(figsize=size, dpi=dpi)
        # Any: matplotlib's Agg canvas methods (draw, blitting, the buffer) are untyped.
        self._canvas: Any = cast(Any, FigureCanvasAgg(self.figure))
        self._ax = self.figure.add_subplot()
        plot_surface_size(log, ax=self._ax, marker=0)
        self.figure.tight_layout()
        # The plot's own marker line (and legend entry) is the one that moves. Animated
        # artists are left out of a full draw: the background holds the rest.
        self._line = next(line for line in self._ax.lines
                          if line.get_label() == "replay position")
        self._line.set_animated(True)
        self._canvas.draw()
        self._background = self._canvas.copy_from_bbox(self.figure.bbox)

    def png(self, marker: int) -> bytes:
        """The figure with the replay-position line at seq `marker`, as PNG bytes."""
        self._canvas.restore_region(self._background)
        self._line.set_xdata([marker, marker])
        self._ax.draw_artist(self._line)
        image = Image.frombuffer("RGBA", self._canvas.get_width_height(),
                                 self._canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        # The fastest zlib level: a step's PNG is sent at once and never stored.
        image.save(buffer, format="png", compress_level=1)
        return buffer.getvalue()


class _MissingWidgets:
    """What `ReplayWidget` is where ipywidgets is not installed: it says so when built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ImportError("ReplayWidget needs ipywidgets, which is not installed: "
                          "python -m pip install 'surface_lab[notebook]' (the frames, "
                          "plots and Replay work without it)", name="ipywidgets")


# ipywidgets ships no type information, so VBox is Any to mypy.
class ReplayWidget(widgets.VBox if widgets is not None else _MissingWidgets):  # type: ignore[misc]
    """Step through a log: Play, a slider, back/step buttons, the surface-size figure with
    the replay position marked and the model's view as HTML. A `VBox`: display it, or put
    it in any other container (`VBox([ReplayWidget(log), ...])`).

    Args:
        source: anything `Replay` accepts, or a `Replay`.
        start: the step (event seq) to show first; the end of the log by default.
        figure: draw the figure (turn off for very large logs or quick tests).
        interval: milliseconds per step while playing.
        **kwargs: passed to `VBox` (`layout=...`, ...).
    """

    def __init__(self, source: Any, *, start: int | None = None, figure: bool = True,
                 interval: int = 400, **kwargs: Any) -> None:
        super().__init__(**kwargs)
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
        self._figure = SurfaceSizeFigure(self.replay.log) if figure and last >= 0 else None
        self.slider.observe(self._render, names="value")
        controls = widgets.HBox([self.play, self.back_button, self.step_button, self.slider])
        self.children = ((controls, self.image, self.html) if self._figure is not None
            else (controls, self.html))
        self._render()

    @property
    def view(self) -> ReplayWidget:
        """Deprecated: the widget itself (it used to wrap a separate `VBox`)."""
        warnings.warn("ReplayWidget.view is deprecated: ReplayWidget is a VBox itself, "
                      "display or compose the widget directly", DeprecationWarning,
                      stacklevel=2)
        return self

    def snapshot_html(self) -> str:
        """The current step as static HTML: the figure as an inline PNG and the model's
        view (log text escaped). Frontends without widgets show this instead."""
        figure = "" if self._figure is None else (
            '<img alt="surface size, replay position marked" style="max-width:100%" '
            f'src="data:image/png;base64,{base64.b64encode(self.image.value).decode()}"/>')
        return figure + str(self.html.value)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # A static page (nbconvert, a documentation site) cannot run the widget: the
        # text/html fallback shows the step it was displayed at. Widget frontends rank
        # the widget view first and ignore it.
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.snapshot_html()
        return bundle

    def _move(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, -1), self.slider.max)

    def _render(self, change: Any = None) -> None:
        self.replay.seek(self.slider.value)
        self.html.value = step_html(self.replay)
        if self._figure is not None:
            self.image.value = self._figure.png(self.replay.seq)
