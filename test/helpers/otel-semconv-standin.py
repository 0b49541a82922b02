"""Stand-in for opentelemetry-semantic-conventions (absent from the local wheel mirror).

wandb imports opentelemetry-sdk for its own telemetry only; the SDK imports attribute-name
constants from this package. Every name resolves to a permissive placeholder.
"""
import importlib.abc
import importlib.machinery
import sys
import types


class _Anything(str):
    def __new__(cls, name="x"):
        return super().__new__(cls, name)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self}.{name}")

    def __call__(self, *args, **kwargs):
        return _Anything(str(self))


def _module_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything(name.lower())


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__getattr__ = _module_getattr
