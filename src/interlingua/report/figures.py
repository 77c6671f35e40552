"""Figures of a run: one figure per question, small multiples where a grid of combinations is the point.

Every figure is drawn from the tidy result table the run wrote, so each number a figure shows can be found
in ``results.csv`` (or the section's table). A question asked of every measure and pooling (how does the
value change with depth? which layers correspond across models?) is one figure with a panel per combination,
not a figure per combination; titles are wrapped to the figure's width and the layout engine makes room for
them, so no text is cut (:func:`clipped_texts` says which text would be).
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import shutil
import struct
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.lines  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.colors import ListedColormap


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


#: At most this many curves share one axis (each a legend entry); a figure of more pairs draws a heatmap.
MAX_CURVES = 6
#: Rows of a heatmap that each get their label; a taller one labels every few rows.
MAX_ROW_LABELS = 60
#: The tallest panel (inches) and the tallest figure (inches): 300 pairs stay on one screenful or two.
MAX_PANEL_HEIGHT = 7.5
MAX_FIGURE_HEIGHT = 20.0

# -- plain text and figures cached by their inputs ----------------------------------------------------------------

_INPUTS_KEY = "interlingua-inputs"  # the PNG text chunk holding the hash of what a figure was drawn from
_current_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("figure_inputs", default=None)
_previous: contextvars.ContextVar[Path | None] = contextvars.ContextVar("previous_figures", default=None)
F = TypeVar("F", bound=Callable[..., Path])


@contextmanager
def drawing(previous: Path | None = None) -> Iterator[None]:
    """Draw a report's figures: every text as plain text (a ``$`` in a model name is never read as mathtext,
    which would fail or garble it) and, given ``previous`` (the ``figures/`` folder of the report being
    replaced), a figure whose inputs did not change is copied from there instead of drawn again."""
    token = _previous.set(previous)
    try:
        with matplotlib.rc_context({"text.parse_math": False}):
            yield
    finally:
        _previous.reset(token)


def png_text(path: Path) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG file (empty if it is not a PNG)."""
    out: dict[str, str] = {}
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            return out
        while len(head := f.read(8)) == 8:
            length, kind = struct.unpack(">I4s", head)
            if kind == b"IEND":
                break
            if kind == b"tEXt":
                key, _, value = f.read(length).partition(b"\0")
                out[key.decode("latin-1")] = value.decode("latin-1")
                f.seek(4, 1)
            else:
                f.seek(length + 4, 1)
    return out


def _digest(h: Any, value: Any) -> None:
    """Feed ``value`` (frames, series, containers, scalars) into the hash ``h``."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        h.update(repr((list(map(str, frame.columns)), [str(t) for t in frame.dtypes], frame.shape)).encode())
        try:
            h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
        except TypeError:  # unhashable cells (lists): their text
            h.update(frame.to_csv(index=False).encode())
    elif isinstance(value, dict):
        h.update(b"{%d" % len(value))
        for k in sorted(value, key=repr):
            _digest(h, k)
            _digest(h, value[k])
    elif isinstance(value, (list, tuple)):
        h.update(b"[%d" % len(value))
        for v in value:
            _digest(h, v)
    elif isinstance(value, Path):
        h.update(value.name.encode())
    else:
        h.update(repr(value).encode())


@functools.cache
def _code_version(source: str | None) -> bytes:
    """What a figure looks like besides its data: the drawing code and matplotlib's version."""
    code = Path(source).read_bytes() if source and Path(source).is_file() else b""
    here = Path(__file__).read_bytes()
    return hashlib.sha256(code + here + matplotlib.__version__.encode()).digest()


def cached(fn: F) -> F:
    """A figure function (its output is its ``path`` argument) that is not drawn again when a PNG of the same
    name in the previous report (:func:`drawing`) was drawn from the same inputs by the same code: the hash of
    the inputs is kept inside the PNG (a text chunk), so a rerun re-renders only what changed."""
    import inspect

    signature = inspect.signature(fn)
    source = inspect.getsourcefile(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Path:
        arguments = signature.bind(*args, **kwargs).arguments
        path = Path(arguments["path"])
        h = hashlib.sha256(fn.__qualname__.encode() + _code_version(source))
        for name, value in arguments.items():
            h.update(name.encode())
            _digest(h, value)
        key = h.hexdigest()
        previous = _previous.get()
        old = previous / path.name if previous is not None else None
        if old is not None and old.is_file() and not old.is_symlink() and png_text(old).get(_INPUTS_KEY) == key:
            if old.resolve() != path.resolve():
                shutil.copyfile(old, path)
            return path
        token = _current_key.set(key)
        try:
            return fn(*args, **kwargs)
        finally:
            _current_key.reset(token)

    return cast("F", wrapper)


# -- compact labels and heatmaps of many pairs ---------------------------------------------------------------------


def compact_labels(pairs: Sequence[str]) -> dict[str, str]:
    """Short, distinct labels for pair names ``model:lang|model:lang``: ``gemma:eng | smol:deu`` (a language's
    script suffix dropped where no two languages of the run share the rest); the full names if that is not
    distinct."""
    sides = {p: p.split("|") for p in pairs}
    langs = {s.rpartition(":")[2] for parts in sides.values() for s in parts if ":" in s}
    base = {lang: lang.split("_", 1)[0] for lang in langs}
    short = len(set(base.values())) == len(langs)

    def side(s: str) -> str:
        model, sep, lang = s.rpartition(":")
        return f"{model}:{base[lang] if short else lang}" if sep else s

    out = {p: " | ".join(side(s) for s in parts) for p, parts in sides.items()}
    return out if len(set(out.values())) == len(out) else {p: p.replace("|", " | ") for p in pairs}


def legend_columns(fig: plt.Figure, labels: Sequence[str], fontsize: float = 7) -> int:
    """Legend columns that fit the figure's width for these labels (an entry: the label plus its handle)."""
    longest = max((len(str(label)) for label in labels), default=1)
    per = 0.6 * fontsize * longest + 3.5 * fontsize  # points
    return int(max(1, min(len(labels), (fig.get_figwidth() * 72 * 0.95) // per)))


def heat_height(n: int, n_panel_rows: int = 1) -> float:
    """Height (inches) of a heatmap panel of ``n`` rows: a labelled row each up to :data:`MAX_ROW_LABELS`,
    bounded so that the figure stays within :data:`MAX_FIGURE_HEIGHT`."""
    return float(min(max(0.9 + 0.1 * n, 2.6), MAX_PANEL_HEIGHT, MAX_FIGURE_HEIGHT / max(n_panel_rows, 1)))


def row_labels(ax: plt.Axes, labels: Sequence[str], show: bool = True) -> None:
    """Label a heatmap's rows: each one up to :data:`MAX_ROW_LABELS` rows, else every few rows."""
    n = len(labels)
    step = 1 if n <= MAX_ROW_LABELS else int(np.ceil(n / 30))
    ticks = list(range(0, n, step))
    shown = [shorten(labels[i]) for i in ticks] if show else []
    ax.set_yticks(ticks, shown, fontsize=row_fontsize(n))


#: The longest label a figure draws in full; longer ones keep their start and end around an ellipsis.
MAX_LABEL = 44


def shorten(label: str, width: int = MAX_LABEL) -> str:
    """``label`` cut in the middle to ``width`` characters (the full name is in the tables)."""
    label = str(label)
    if len(label) <= width:
        return label
    keep = width - 1
    return label[: (keep + 1) // 2] + "…" + label[len(label) - keep // 2 :]


def row_fontsize(n: int) -> float:
    """Font size of the row labels of a heatmap of ``n`` rows."""
    return float(max(4.5, min(7.0, 320 / max(n, 1))))


def label_width(labels: Sequence[str], n: int) -> float:
    """Inches the (shortened) row labels of a heatmap of ``n`` rows take beside it."""
    longest = max((len(shorten(label)) for label in labels), default=0)
    return 0.6 * row_fontsize(n) * longest / 72 + 0.2


def depth_image(
    rows: pd.DataFrame, key: str, x: str, value: str, order: Sequence[str], columns: int = 200
) -> np.ndarray:
    """``(len(order), columns)``: row i is the ``value`` of the rows whose ``key`` is ``order[i]`` as a step
    function of ``x`` over [0, 1] (each column holds the value at the nearest ``x`` that row has: models of
    different depth share the axis without interpolation); NaN where a row has nothing."""
    grid = np.linspace(0.0, 1.0, columns)
    img = np.full((len(order), columns), np.nan)
    index = {k: i for i, k in enumerate(order)}
    for name, g in rows.groupby(key, sort=False):
        g = g.dropna(subset=[x]).sort_values(x)
        if g.empty or name not in index:
            continue
        xs = g[x].to_numpy(dtype=float)
        nearest = np.abs(grid[:, None] - xs[None, :]).argmin(axis=1)
        img[index[name]] = g[value].to_numpy(dtype=float)[nearest]
    return img


def heat(ax: plt.Axes, img: np.ndarray, vmin: float, vmax: float, cmap: str = "viridis") -> Any:
    n = img.shape[0]
    return ax.imshow(
        np.ma.masked_invalid(img),
        aspect="auto",
        interpolation="nearest",
        extent=(0.0, 1.0, n - 0.5, -0.5),
        vmin=vmin,
        vmax=vmax,
        cmap=cmap,
    )


def _limits(values: pd.Series | np.ndarray) -> tuple[float, float]:
    """A colour scale of 0..1 widened to the data (a measure may be negative)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return (min(0.0, float(v.min())), max(1.0, float(v.max()))) if v.size else (0.0, 1.0)


def title_width(width_inches: float, fontsize: float = 9) -> int:
    """Characters of a title line that fit a figure ``width_inches`` wide (see :func:`title_lines`)."""
    return max(20, int(0.9 * width_inches * 72 / (0.6 * fontsize)))


def title_lines(width_inches: float, *lines: str, fontsize: float = 9) -> str:
    """The title ``lines`` wrapped to what fits a figure ``width_inches`` wide at ``fontsize`` (never cut off).

    The axes (over which a title is centred) take about 90% of the figure's width, and a character of the
    default sans-serif font about 0.6 em; a longer line is broken at spaces (or, for a label without spaces
    such as a pair, inside it).
    """
    chars = title_width(width_inches, fontsize)
    return "\n".join(part for line in lines for part in (textwrap.wrap(line, chars) or [""]))


def set_title(fig: plt.Figure, ax: plt.Axes, *lines: str, fontsize: float = 9) -> None:
    ax.set_title(title_lines(fig.get_figwidth(), *lines, fontsize=fontsize), fontsize=fontsize)


__all__ = [
    "MAX_CURVES",
    "cached",
    "compact_labels",
    "drawing",
    "png_text",
    "_safe",
    "clipped_texts",
    "colorbar",
    "finish",
    "heat",
    "set_title",
    "panels",
    "grid_panels",
]


# -- small multiples: one figure per question, one panel per combination ----------------------------------------


def panels(n_rows: int, n_cols: int, panel_w: float, panel_h: float) -> tuple[plt.Figure, np.ndarray]:
    """A figure of ``n_rows`` x ``n_cols`` panels laid out by matplotlib's constrained layout.

    Constrained layout makes room for the wrapped suptitle, the panels' titles and labels and a legend placed
    ``"outside"``, so nothing is cut at the figure's edge (:func:`clipped_texts` checks it).
    """
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(panel_w * n_cols, panel_h * n_rows + 0.6), squeeze=False, layout="constrained"
    )
    return fig, axes


def suptitle(fig: plt.Figure, *lines: str, fontsize: float = 10) -> None:
    """The figure's title, wrapped to its width (never cut off)."""
    fig.suptitle(title_lines(fig.get_figwidth(), *lines, fontsize=fontsize), fontsize=fontsize)


def panel_title(ax: plt.Axes, *lines: str, fontsize: float = 8) -> None:
    """A panel's title, wrapped to the panel's width."""
    fig = ax.get_figure()
    # the report's axes live on a Figure (panels), never on a SubFigure
    width = fig.get_figwidth() * ax.get_position().width / 0.9 if fig is not None else 4.0  # type: ignore[union-attr]
    ax.set_title(title_lines(max(width, 1.5), *lines, fontsize=fontsize), fontsize=fontsize)


def clipped_texts(fig: plt.Figure, tolerance: float = 1.0) -> list[str]:
    """Every visible, non-empty text of ``fig`` that reaches beyond the figure's edge (what a reader would see cut)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    w, h = fig.bbox.width, fig.bbox.height
    # tick labels of ticks outside an axis' view limits exist but are never drawn
    undrawn: set[int] = set()  # their ids
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(1.0, abs(hi - lo))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - slack <= tick.get_loc() <= hi + slack:
                    undrawn.update(map(id, (tick.label1, tick.label2)))
    out = []
    for text in fig.findobj(matplotlib.text.Text):
        if id(text) in undrawn or not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -tolerance or box.y0 < -tolerance or box.x1 > w + tolerance or box.y1 > h + tolerance:
            out.append(text.get_text())
    return out


def finish(fig: plt.Figure, path: Path, dpi: int = 120) -> Path:
    key = _current_key.get()
    fig.savefig(path, dpi=dpi, metadata={_INPUTS_KEY: key} if key else None)
    plt.close(fig)
    return path


def colorbar(fig: plt.Figure, im: Any, axes: np.ndarray, label: str) -> None:
    bar = fig.colorbar(im, ax=axes, shrink=0.6)
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=7)


def tab10_colours() -> Sequence[tuple[float, float, float]]:
    """The ten RGB colours of matplotlib's qualitative ``tab10`` (a ListedColormap; its stubs type them loosely)."""
    return cast("Sequence[tuple[float, float, float]]", cast("ListedColormap", plt.cm.tab10).colors)


def _pair_colours(pairs: list[str]) -> dict[str, Any]:
    colours = tab10_colours()
    return {p: colours[i % 10] for i, p in enumerate(pairs)}


@cached
def grid_panels(
    grid: pd.DataFrame,
    columns: list[str],
    title: str,
    path: Path,
    value: str = "matched",
    legend: str = "red star = grid maximum",
) -> Path:
    """Layer x layer heatmaps of ``value``, a column per combination of ``columns`` (e.g. measure and pooling).

    Up to four pairs: a row of panels per pair, the maximum of each marked. More: one panel per combination,
    the mean over pairs of each grid on a common relative-depth scale, with every pair's maximum as a star
    (a figure of 300 pairs is then as tall as one of 1).
    """
    pairs = list(dict.fromkeys(grid["pair"]))
    combos: list[tuple[str, ...]] = (
        list(dict.fromkeys(map(tuple, grid[columns].astype(str).to_numpy()))) if columns else [()]
    )
    if len(pairs) > 4:
        return _grid_summary(grid, columns, combos, len(pairs), title, path, value)
    labels = compact_labels(pairs)
    fig, axes = panels(len(pairs), len(combos), 3.2, 2.7)
    im = None
    for i, pair in enumerate(pairs):
        for j, combo in enumerate(combos):
            ax = axes[i, j]
            g = grid[grid["pair"] == pair]
            for c, v in zip(columns, combo):
                g = g[g[c].astype(str) == v]
            piv = g.pivot_table(index="layer_a", columns="layer_b", values=value)
            if piv.empty or not np.isfinite(piv.to_numpy()).any():
                ax.text(0.5, 0.5, "undefined", ha="center", va="center", fontsize=8, transform=ax.transAxes)
                ax.set_xticks([])
                ax.set_yticks([])
            else:
                im = ax.imshow(piv.to_numpy(), origin="lower", aspect="auto", vmin=0, vmax=1, cmap="viridis")
                r, col = np.unravel_index(np.nanargmax(piv.to_numpy()), piv.shape)
                ax.plot(col, r, "r*", ms=9)
                # at most ~12 labels an axis: 30 layer labels in a 3-inch panel run into each other
                sx, sy = -(-piv.shape[1] // 12), -(-piv.shape[0] // 12)
                ax.set_xticks(range(0, piv.shape[1], sx), [str(v) for v in piv.columns[::sx]])
                ax.set_yticks(range(0, piv.shape[0], sy), [str(v) for v in piv.index[::sy]])
                ax.tick_params(labelsize=6)
                ax.set_xlabel(f"layer of {g['model_b'].iat[0]} ({g['lang_b'].iat[0]})", fontsize=7)
                ax.set_ylabel(f"layer of {g['model_a'].iat[0]} ({g['lang_a'].iat[0]})", fontsize=7)
            panel_title(ax, labels[pair], ", ".join(combo), fontsize=7)
    if im is not None:
        colorbar(fig, im, axes, value)
    suptitle(fig, title, legend)
    return finish(fig, path)


def _relative(g: pd.DataFrame, layer: str, depth: str) -> pd.Series:
    """The rows' relative depth: the ``depth`` column, or the layer over the pair's deepest layer."""
    if depth in g and g[depth].notna().all():
        return g[depth].astype(float)
    return g[layer].astype(float) / max(float(g[layer].max()), 1.0)


def _grid_summary(
    grid: pd.DataFrame, columns: list[str], combos: list[tuple[str, ...]], n: int, title: str, path: Path, value: str
) -> Path:
    bins = 10
    centres = (np.arange(bins) + 0.5) / bins
    fig, axes = panels(1, len(combos), max(3.6, 7.0 / len(combos)), 3.4)
    im = None
    for j, combo in enumerate(combos):
        ax = axes[0, j]
        sel = grid
        for name, v in zip(columns, combo):
            sel = sel[sel[name].astype(str) == v]
        stack, peaks = [], []
        for _, g in sel.groupby("pair", sort=False):
            g = g.assign(da=_relative(g, "layer_a", "depth_a"), db=_relative(g, "layer_b", "depth_b"))
            piv = g.pivot_table(index="da", columns="db", values=value)
            vals = piv.to_numpy(dtype=float)
            if not np.isfinite(vals).any():
                continue
            ia = np.abs(centres[:, None] - piv.index.to_numpy(dtype=float)[None, :]).argmin(axis=1)
            ib = np.abs(centres[:, None] - piv.columns.to_numpy(dtype=float)[None, :]).argmin(axis=1)
            stack.append(vals[np.ix_(ia, ib)])
            r, c = np.unravel_index(np.nanargmax(vals), vals.shape)
            peaks.append((float(piv.columns[c]), float(piv.index[r])))
        if not stack:
            ax.text(0.5, 0.5, "undefined", ha="center", va="center", fontsize=8, transform=ax.transAxes)
        else:
            with np.errstate(all="ignore"):
                filled = np.stack(stack)
                counts = np.isfinite(filled).sum(axis=0)
                mean = np.where(counts > 0, np.nansum(filled, axis=0) / np.maximum(counts, 1), np.nan)
            im = ax.imshow(
                np.ma.masked_invalid(mean), origin="lower", extent=(0, 1, 0, 1), vmin=0, vmax=1, cmap="viridis"
            )
            xs, ys = zip(*peaks)
            ax.plot(xs, ys, "r*", ms=5, alpha=0.7, mec="none")
        ax.set_xlabel("relative depth, side b", fontsize=7)
        ax.set_ylabel("relative depth, side a", fontsize=7)
        ax.tick_params(labelsize=6)
        panel_title(ax, ", ".join(combo) or value, f"{len(stack)} pairs", fontsize=7)
    if im is not None:
        colorbar(fig, im, axes, f"{value}, mean over pairs")
    suptitle(
        fig,
        title,
        f"mean of {n} pairs' grids on relative depth; red star = a pair's maximum",
    )
    return finish(fig, path)
