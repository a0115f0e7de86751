"""Builds the cinfer_recipe CPython extension from the C sources of src/recipe.

Offline and dependency-free: compiles ../src/recipe/*.c directly (they depend only on
jansson, linked from the system: Debian package libjansson-dev). Install with
    pip install --no-build-isolation ./python   (in-tree backend _recipe_build.py: no `wheel` needed)
or build in place with
    python3 python/setup.py build_ext --build-lib DIR  and put DIR on PYTHONPATH.
Set CINFER_SRC to the repository root if this directory was copied elsewhere."""
import glob
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.environ.get("CINFER_SRC", os.path.dirname(here))
sources = [os.path.join(here, "cinfer_recipe.c")] + sorted(glob.glob(os.path.join(root, "src", "recipe", "*.c")))
if len(sources) < 2:
    raise SystemExit(f"recipe sources not found under {root}/src/recipe (set CINFER_SRC)")



def get_extension():
    return Extension(
        "cinfer_recipe",
        sources=sources,
        include_dirs=[os.path.join(root, "include"), os.path.join(root, "src")],
        libraries=["jansson"],
        extra_compile_args=["-std=c17", "-D_GNU_SOURCE", "-Wall", "-Wno-missing-field-initializers"],
    )


if __name__ == "__main__":
    setup(
        name="cinfer-recipe",
        version="0.1.0",
        description="cinfer recipe: OpenAI Chat / Anthropic Messages / OpenAI Responses conversion and model-output parsing",
        ext_modules=[get_extension()],
    )
