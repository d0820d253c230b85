"""Model families: each family's output format in one module, behind one registry.

A family (:class:`Family`) holds its route spec (reasoning, answer and tool-call regions), its
tool-call format, the chat-template signature that detects it, whether its delimiters are
special tokens, and how a forced tool call is opened. The operators (``route("name")``), the
server and the CLI ask the registry:

- :func:`families` -- every family, in detection order; :func:`family_names`;
- :func:`family` -- one by name or alias (ValueError naming the known ones);
- :func:`detect_family` -- the family a chat template points to.

Adding a family is adding one module here that defines ``FAMILY`` (see CONTRIBUTING.md).
"""

from ._family import Family
from ._registry import detect_family, discover, families, family, family_names, names_to_families

__all__ = ["Family", "detect_family", "discover", "families", "family", "family_names", "names_to_families"]
