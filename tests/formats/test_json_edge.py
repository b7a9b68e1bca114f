"""The shared JSON edge helpers: locating a key path in the raw text, naming it, loading."""

from __future__ import annotations

import pytest

from zlops.errors import ParseError
from zlops.formats._json import (
    find_nonfinite,
    line_of,
    load_json,
    path_text,
    replace_nonfinite,
    show,
)

TEXT = """\
{
  "a": 1,
  "b\\"q": {"x": [10,
                 20, {"y": "z"}],
          "w": null},
  "cases": [
    {"name": "k"},

    {"name": "m", "samples": [1,
                              2]}
  ],
  "a": 2
}
"""


@pytest.mark.parametrize(("path", "line"), [
    ((), 1),
    (("b\"q",), 3),
    (("b\"q", "x", 1), 4),
    (("b\"q", "x", 2, "y"), 4),
    (("b\"q", "w"), 5),
    (("cases", 0), 7),
    (("cases", 1), 9),
    (("cases", 1, "samples", 1), 10),
    (("a",), 12),                            # json.loads keeps the last duplicate, so do we
    (("cases", 1, "missing"), 9),            # falls back to the nearest existing parent
    (("cases", 5), 6),
    (("cases", 0, 0), 7),                    # not a list: the parent
])
def test_line_of(path: tuple[str | int, ...], line: int) -> None:
    assert line_of(TEXT, path) == line


def test_line_of_on_broken_text_falls_back_to_what_it_can_read() -> None:
    assert line_of('{"a": [1,\n ]}', ("a", 1)) == 1
    assert line_of('{\n"a": [1,\n }', ("a", 1)) == 2
    assert line_of("\ufeff\n{\"a\": 1}", ("a",)) == 2


def test_path_text() -> None:
    assert path_text(("cases", 2, "samples", 1)) == "cases[2].samples[1]"
    assert path_text(()) == "(top level)"
    assert path_text((0, "a")) == "[0].a"


def test_show() -> None:
    assert show("fast") == '"fast"'
    assert show(True) == "true"
    assert show(None) == "null"
    assert show(float("nan")) == "NaN"
    assert show({"a": 1}) == "an object"
    assert show([1]) == "a list"
    assert show("x" * 100).endswith('...') and len(show("x" * 100)) == 60


def test_load_json_accepts_a_bom_and_reports_syntax_lines() -> None:
    assert load_json("\ufeff{\"a\": 1}", source="f") == {"a": 1}
    with pytest.raises(ParseError) as excinfo:
        load_json('{\n"a": 1,\n}', source="f")
    assert excinfo.value.line == 3
    assert str(excinfo.value).startswith("f:3: invalid JSON")


def test_nonfinite_helpers_do_not_mutate() -> None:
    value = {"a": [1.0, {"b": float("-inf")}], "c": float("nan")}
    assert find_nonfinite(value) == (["a", 1, "b"], float("-inf"))
    assert replace_nonfinite(value) == {"a": [1.0, {"b": "-Infinity"}], "c": "NaN"}
    assert value["c"] != value["c"]   # still NaN: the input was not changed
    assert find_nonfinite({"a": [1, "x", None]}) is None
