#!/usr/bin/env python3
"""Rewrites cmake/unity-alone.txt: the source files that must compile alone
in a unity build (cmake/UnityBuild.cmake), because they define a file-local
name (anonymous namespace, static, a struct or alias of their own) that an
earlier file of the same batch defines too.

    scripts/unity-alone.py BUILD_DIR

BUILD_DIR is a build folder configured with -DDUCTUS_UNITY_BUILD=ON; it is
configured again after each change of the list, since leaving a file out
changes the batches after it. Needs Universal Ctags.
"""
import fcntl, glob, os, re, shutil, subprocess, sys

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
listfile = os.path.join(here, "cmake", "unity-alone.txt")
CTAGS = shutil.which("ctags-universal") or "ctags"
HEADER = """# Source files that compile alone in a unity build (cmake/UnityBuild.cmake):
# each defines a file-local name that another file of its target defines
# too. Written by scripts/unity-alone.py; one path per line, from the top.
"""


def file_local_names(path):
    """{(namespace, name): what it is} of every file-scope definition ctags
    sees. An alias is what it names: two files may both say
    `using json = nlohmann::json;`, which one translation unit allows."""
    if not os.path.exists(path):
        return {}  # generated at build time (the embedded migrations)
    out = subprocess.run([CTAGS, "-f", "-", "--fields=+Zk", "--extras=-q", "--language-force=C++", path],
                         capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        name, kind, fields = parts[0], parts[3], parts[4:]
        scope = next((f[6:] for f in fields if f.startswith("scope:")), "")
        # TEST(...) and other macro calls look like function definitions.
        if kind == "n" or name.startswith("__anon") or re.fullmatch(r"[A-Z0-9_]+", name):
            continue
        if scope.startswith(("class:", "struct:", "union:", "enum:", "function:")):
            continue
        local = "file:" in fields or "__anon" in scope
        if kind in ("s", "c", "t", "g", "u"):
            local = True  # a type defined in a .cpp is the file's own
        if kind == "e" and scope.startswith("namespace:"):
            local = True
        if not local or kind not in ("f", "v", "s", "c", "t", "g", "u", "e"):
            continue
        ns = re.sub(r"(::)?__anon\w+", "", scope.replace("namespace:", ""))
        typeref = next((f for f in fields if f.startswith("typeref:")), "")
        names[(ns, name)] = typeref if kind == "t" and typeref else path
    # A using-declaration (`using std::chrono::seconds;`) names a thing in
    # the file's namespace too; ctags doesn't list them.
    spaces = [l.split("\t") for l in out.splitlines()]
    spaces = [p[4][len("scope:namespace:"):] + "::" + p[0] if len(p) > 4 and p[4].startswith("scope:namespace:")
              else p[0] for p in spaces if len(p) > 3 and p[3] == "n" and not p[0].startswith("__anon")]
    ns = max(spaces, key=len, default="")
    with open(path, errors="replace") as f:
        for target, name in re.findall(r"^using ((?:[\w:]+::)?(\w+));", f.read(), re.M):
            names.setdefault((ns, name), "using:" + target)
    return names


def batches(build):
    for unity in sorted(glob.glob(os.path.join(build, "**", "Unity", "unity_*_cxx.cxx"), recursive=True)):
        with open(unity) as f:
            yield unity, re.findall(r'#include "([^"]+)"', f.read())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    # One run at a time: scripts/test's two builds and .ci/run's fuzz build
    # run side by side, and each would write the list over the others'.
    lock = open(listfile, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    alone = set()
    if os.path.exists(listfile):
        with open(listfile) as f:
            alone = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    cache = {}
    while True:
        subprocess.run(["cmake", "-S", here, "-B", build, "-DDUCTUS_UNITY_BUILD=ON"], check=True,
                       stdout=subprocess.DEVNULL)
        added = set()
        for _, files in batches(build):
            seen = {}
            for path in files:
                if path not in cache:
                    cache[path] = file_local_names(path)
                names = cache[path]
                clash = next((n for n in sorted(names) if n in seen and seen[n][1] != names[n]), None)
                if clash:
                    rel = os.path.relpath(path, here)
                    print(f"{rel}: {'::'.join(filter(None, clash))} is also defined in "
                          f"{os.path.relpath(seen[clash][0], here)}")
                    added.add(rel)
                    continue
                for n, what in names.items():
                    seen.setdefault(n, (path, what))
        added -= alone
        if not added:
            break
        alone |= added
        with open(listfile, "w") as f:
            f.write(HEADER + "".join(p + "\n" for p in sorted(alone)))
    print(f"{len(alone)} files compile alone")


main()
