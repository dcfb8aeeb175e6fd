"""MkDocs hooks for this site (`hooks:` in mkdocs.yml).

The pages lay code out side by side in HTML tables (`<td>` then a fenced block), which GitHub
renders as Markdown. Python-Markdown renders Markdown inside HTML only where the element says
`markdown="1"` (the `md_in_html` extension), so this adds it to each table cell.

A snippet that needs TensorFlow is fenced as `python tensorflow`, which GitHub highlights as
Python and the test suite does not run (tests/test_docs.py); docs/port.md also names the file a
block shows (`python tensorflow grads.py`, `text report grads.py`, read by
tests/test_port_docs.py). Python-Markdown knows no word after the language, so the fence is given
to it as the language alone. A fence that still reaches the page unrendered is a warning, which
fails the strict build.
"""

from __future__ import annotations

import logging
import re
from typing import Any

_CELL = re.compile(r"<(td|th)>")
_WORDS_AFTER_LANGUAGE = re.compile(r"^```(\w+) [^\n`]*$", re.M)
_log = logging.getLogger("mkdocs.hooks.tf_compat_grad")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = _WORDS_AFTER_LANGUAGE.sub(r"```\1", markdown)
    return _CELL.sub(r'<\1 markdown="1">', markdown)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    if "```" in html:
        _log.warning("%s: a fenced block was not rendered (an unknown fence?)", page.file.src_uri)
    return html
