"""The footer: the keys of the focused widget and the app, drawn as one line by one widget.

Textual's `Footer` is a container with a widget per key, recomposed (every key unmounted, mounted and styled again)
whenever the bindings may have changed, and each recomposition lays the whole screen out again: on a run of 1,000
tasks it was a third of the UI thread's start-up (~0.1 s of CPU while the first tasks start). This footer renders a
`Text` instead, so a change of focus or bindings only repaints one line. It looks like Textual's (same design tokens)
and a click on a key presses it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.screen import Screen


_ENABLED, _DISABLED = Style(), Style(dim=True)


class _Key(NamedTuple):
    key: str
    display: str
    description: str
    enabled: bool


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

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
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
                shown[binding.action] = _Key(key, self.app.get_key_display(binding), binding.description, enabled)
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in bindings:
            _, binding, enabled, _tooltip = bindings[self.app.COMMAND_PALETTE_BINDING]
            palette = _Key(binding.key, self.app.get_key_display(binding), binding.description, enabled)
            shown.pop(binding.action, None)
        return list(shown.values()), palette

    def render(self) -> Text:
        keys, palette = self.keys()
        key_style = self.get_component_rich_style("key-footer--key")
        description_style = self.get_component_rich_style("key-footer--description")
        text = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []

        def add(key: _Key) -> None:
            start = text.cell_len
            dim = _ENABLED if key.enabled else _DISABLED
            text.append(f" {key.display} ", key_style + dim)
            text.append(f"{key.description} ", description_style + dim)
            self._spans.append((start, text.cell_len, key))

        for key in keys:
            add(key)
        if palette is not None:
            right = Text(no_wrap=True, end="")
            right.append("▏", description_style + _DISABLED)
            right.append(f"{palette.display} ", key_style)
            right.append(f"{palette.description} ", description_style)
            gap = self.size.width - text.cell_len - right.cell_len
            if gap >= 1:
                text.append(" " * gap)
                start = text.cell_len
                text.append_text(right)
                self._spans.append((start, text.cell_len, palette))
        return text

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                if key.enabled:
                    self.app.simulate_key(key.key)
                else:
                    self.app.bell()
                return
