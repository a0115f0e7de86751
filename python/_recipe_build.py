"""In-tree PEP 517 build backend for cinfer_recipe (see pyproject.toml).

build_wheel compiles the extension with setuptools' build_ext (sources and flags from
setup.py's get_extension()) and writes a minimal, valid wheel with the stdlib zipfile
module, so no `wheel` package is needed. Only wheels are supported (no sdist)."""
import base64
import hashlib
import os
import sys
import sysconfig
import tempfile
import zipfile

NAME, VERSION = "cinfer_recipe", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, impl, plat)


def _metadata():
    return "Metadata-Version: 2.1\nName: cinfer-recipe\nVersion: %s\nSummary: cinfer recipe protocol library\n" % VERSION


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "%s-%s.dist-info" % (NAME, VERSION))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata())
    return os.path.basename(d)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    sys.path.insert(0, HERE)
    import setup as recipe_setup  # noqa: E402  (defines get_extension without running setup())
    from setuptools import Distribution

    with tempfile.TemporaryDirectory() as tmp:
        dist = Distribution({"name": "cinfer-recipe", "ext_modules": [recipe_setup.get_extension()]})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib = os.path.join(tmp, "lib")
        cmd.build_temp = os.path.join(tmp, "build")
        cmd.ensure_finalized()
        cmd.run()
        built = [os.path.join(cmd.build_lib, f) for f in os.listdir(cmd.build_lib)]
        wheel_name = "%s-%s-%s.whl" % (NAME, VERSION, _tag())
        info = "%s-%s.dist-info" % (NAME, VERSION)
        files = {}
        for path in built:
            with open(path, "rb") as f:
                files[os.path.basename(path)] = f.read()
        files[info + "/METADATA"] = _metadata().encode()
        files[info + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: cinfer _recipe_build\nRoot-Is-Purelib: false\nTag: %s\n"
                                  % _tag()).encode()
        record = [_record_line(p, d) for p, d in files.items()] + [info + "/RECORD,,"]
        files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
        with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
            for p, d in files.items():
                z.writestr(p, d)
    return wheel_name
