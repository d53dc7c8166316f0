"""The footer: the keys of the focused widget and the app, drawn as one line by one widget.

Textual's `Footer` is a container with a widget per key, recomposed (every key unmounted, mounted and styled again)
whenever the bindings may have changed, and each recomposition lays the whole screen out again: on a run of 1,000
tasks it was a third of the UI thread's start-up (~0.1 s of CPU while the first tasks start). This footer renders a
`Text` instead, so a change of focus or bindings only repaints one line. It looks like Textual's (same design tokens)
and a click on a key presses it.

When the keys don't fit the width, the least important ones (by the `priority` the app gives) are left out, not the
last ones, and a `… N more` key says so (it opens the help, which lists every key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.screen import Screen


_ENABLED, _DISABLED = Style(), Style(dim=True)


class _Key(NamedTuple):
    key: str
    display: str
    description: str
    enabled: bool
    action: str = ""


def _cells(key: _Key) -> int:
    """Cells a key takes on the line: ` k description `."""
    return len(key.display) + len(key.description) + 3


def _palette_cells(key: _Key, short: bool = False) -> int:
    """Cells the palette's key takes at the right end: `▏^p description `, or `▏^p ` when short."""
    return len(key.display) + 2 + (0 if short else len(key.description) + 1)


class KeyFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-footer--key", "key-footer--description"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(
        self,
        *,
        priority: Sequence[str] = (),
        more_key: str = "question_mark",
        label: Callable[[Binding], str | None] = lambda binding: binding.description,
        id: str | None = None,
    ) -> None:
        """`priority`: actions, most important first, kept longest when the line is too narrow (the others follow in
        the order they are shown). `more_key` is pressed by a click on the `… N more` key. `label`: what a key is
        called where the app is now, or None to leave it out (a key that only answers that it does not work here)."""
        super().__init__(id=id)
        self.priority = {action: rank for rank, action in enumerate(priority)}
        self.label = label
        self.more_key = more_key
        self._spans: list[tuple[int, int, _Key]] = []  # (first cell, end cell, key) as last rendered, for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is self.screen:
            self.refresh()

    def keys(self) -> tuple[list[_Key], _Key | None]:
        """The shown keys, one per action as Textual's footer shows them, and the command palette's key."""
        bindings = self.screen.active_bindings
        shown: dict[str, _Key] = {}
        for key, (_, binding, enabled, _tooltip) in bindings.items():
            if binding.show and binding.action not in shown:
                label = self.label(binding)
                if label is not None:
                    shown[binding.action] = _Key(key, self.app.get_key_display(binding), label, enabled, binding.action)
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in bindings:
            _, binding, enabled, _tooltip = bindings[self.app.COMMAND_PALETTE_BINDING]
            palette = _Key(binding.key, self.app.get_key_display(binding), binding.description, enabled)
            shown.pop(binding.action, None)
        return list(shown.values()), palette

    def render(self) -> Text:
        keys, palette = self.keys()
        width = self.size.width
        shown = self._fitting(keys, width - (_palette_cells(palette, short=True) if palette else 0))
        key_style = self.get_component_rich_style("key-footer--key")
        description_style = self.get_component_rich_style("key-footer--description")
        text = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []

        def add(key: _Key, style: Style = _ENABLED) -> None:
            start = text.cell_len
            dim = style if key.enabled else _DISABLED
            text.append(f" {key.display} ", key_style + dim)
            text.append(f"{key.description} ", description_style + dim)
            self._spans.append((start, text.cell_len, key))

        for key in shown:
            add(key)
        if len(shown) < len(keys):
            add(_Key(self.more_key, "…", f"{len(keys) - len(shown)} more", True), _DISABLED)
        if palette is not None:
            gap = width - text.cell_len - _palette_cells(palette)
            short = gap < 1
            if short:
                gap = width - text.cell_len - _palette_cells(palette, short=True)
            if gap >= 1:
                text.append(" " * gap)
                start = text.cell_len
                text.append("▏", description_style + _DISABLED)
                text.append(f"{palette.display} ", key_style)
                if not short:
                    text.append(f"{palette.description} ", description_style)
                self._spans.append((start, text.cell_len, palette))
        return text

    def _fitting(self, keys: list[_Key], width: int) -> list[_Key]:
        """The keys that fit `width` cells (with the `… N more` key when some don't), in their order: the least
        important are dropped first."""
        if sum(_cells(k) for k in keys) <= width:
            return keys
        width -= _cells(_Key("", "…", f"{len(keys)} more", True))
        ranked = sorted(range(len(keys)), key=lambda i: (self.priority.get(keys[i].action, len(self.priority)), i))
        kept: set[int] = set()
        used = 0
        for i in ranked:
            if used + _cells(keys[i]) > width:
                break
            kept.add(i)
            used += _cells(keys[i])
        return [key for i, key in enumerate(keys) if i in kept]

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                if key.enabled:
                    self.app.simulate_key(key.key)
                else:
                    self.app.bell()
                return
