"""Textual's `Footer`, rebuilt only when the keys it shows really change.

The stock footer recomposes (unmounts and mounts a widget per key) every time the screen's bindings *may* have
changed, and each key widget then toggles a CSS class twice, restyling itself each time: on start-up that happened four
times in a row, ~0.3 s of CPU on the UI thread while the first tasks start (and the first key press waited for it).
This one looks and behaves the same, but coalesces those notifications into one check per frame and recomposes only
when the shown keys differ from what is on screen.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

if TYPE_CHECKING:
    from textual.screen import Screen


class KeyFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Show the keys in the first frame: the stock footer waits for a notification after it, then recomposes.
        self.set_reactive(Footer._bindings_ready, True)
        self._shown_keys: tuple | None = None
        self._check_pending = False

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen and not self._check_pending:
            self._check_pending = True
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        self._check_pending = False
        if not self.is_attached:
            return
        if self._keys() != self._shown_keys:
            await self.recompose()

    def _keys(self) -> tuple:
        """What `compose` would show: the shown bindings with their state, and the command palette's."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return (self.show_command_palette, self.compact, self.combine_groups, tuple(
            (key, binding.key, binding.action, binding.description, binding.group, enabled, tooltip)
            for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette))

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._shown_keys = self._keys()
        for widget in super().compose():
            if isinstance(widget, FooterKey) and "compact" in (getattr(widget, "_reactive_connect", None) or {}):
                # A key bound to the footer's `compact` is born with its value, so the binding changes no class
                # (each change restyles the key). The command palette's key is not bound and keeps its own.
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget
