"""The type stubs (`_nearflow.pyi`) name every class, method and property the module has, and
nothing it lacks."""

import ast
import pathlib

import nearflow
from nearflow import _nearflow


def stubbed():
    path = pathlib.Path(nearflow.__file__).with_name("_nearflow.pyi")
    tree = ast.parse(path.read_text())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return classes


def public(cls):
    return {n for n in vars(cls) if not n.startswith("_") or n in ("__arrow_c_array__",)}


def test_every_class_and_member_is_stubbed():
    classes = stubbed()
    module_classes = {n for n in dir(_nearflow) if isinstance(getattr(_nearflow, n), type) and not n.startswith("_")}
    # The iterator of solutions is an implementation detail, typed as Iterator[QuerySolution].
    module_classes.discard("SolutionsIter")
    assert module_classes == set(classes)
    for name in module_classes:
        cls = getattr(_nearflow, name)
        if issubclass(cls, BaseException):
            continue
        missing = public(cls) - classes[name]
        assert not missing, f"{name}: {missing} not in the stubs"
        extra = {m for m in classes[name] if not m.startswith("__")} - public(cls)
        assert not extra, f"{name}: the stubs name {extra}, which it lacks"
