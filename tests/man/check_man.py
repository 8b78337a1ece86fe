#!/usr/bin/python3
"""The man pages and the code agree (issue 30).

  check_man.py --src DIR --man DIR --cotal BIN --daemon BIN --version V

1. groff reads each page without a warning (-mdoc -ww).
2. Every flag the code compares an argument with (strcmp(..., "--x")) is in
   its binary's page, and every flag the page names is one the code compares
   with.
3. Every flag the page names is accepted: on the command line the page gives
   for it, followed by a flag no command takes ("--zz-unknown"), the binary
   refuses that one and not the flag before it. Run in an empty HOME and
   workspace, so nothing is made and nothing reached.
4. --help and --version answer on stdout with exit 0 on the daemon, on
   cotal and on every cotal command; a usage error goes to stderr, exit 2.
5. Issue 43: for every cotal command, its --help, the usage line after a
   usage error, its cotal(1) synopsis and the bash completion (run in bash)
   list the same flags, and cotal(1)'s EXIT STATUS lists what --help does.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

STRCMP = re.compile(r'strcmp\(\s*[^,()]+(?:\[[^\]]*\])?\s*,\s*"(--[a-z0-9][a-z0-9-]*)"\s*\)')
FL = re.compile(r'\bFl -([a-z0-9][a-z0-9-]*)')
MACROS = {"Fl", "Ar", "Oo", "Oc", "Op", "Ns", "Cm", "Nm", "Li", "Ic", "Pq", "Ql"}
UNKNOWN = "--zz-unknown"
# Flags that act alone (the rest of the line is not read), and the
# daemon's internal ones (its own children's), checked against the source
# only.
ALONE = {"--help", "--version", "--confinement"}
INTERNAL = {"--worker", "--metrics-process"}

failures = []


def fail(msg):
    failures.append(msg)
    print("✗ " + msg)


def source_flags(src, patterns):
    flags = set()
    for pat in patterns:
        for path in glob.glob(os.path.join(src, pat)):
            with open(path, encoding="utf-8") as f:
                flags.update(STRCMP.findall(f.read()))
    return flags


def page_flags(text):
    return {"--" + m for m in FL.findall(text)}


def groff_clean(page):
    r = subprocess.run(["groff", "-Tutf8", "-mdoc", "-ww", "-z", page],
                       capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        fail(f"groff warns about {page}: {r.stderr.strip()}")


def parse_line(toks):
    """(command words, [(flag, its value or None, required)]) of a synopsis
    line's tokens: words up to the first macro, then each `Fl -x`, with a
    value when an `Ar` follows it, required when outside `Oo ... Oc`."""
    words = []
    while toks and toks[0] not in MACROS:
        words.append(toks.pop(0))
    flags, depth = [], 0
    for i, t in enumerate(toks):
        if t == "Oo":
            depth += 1
        elif t == "Oc":
            depth -= 1
        elif t == "Fl" and i + 1 < len(toks) and toks[i + 1].startswith("-"):
            flag = "-" + toks[i + 1]
            j = i + 2
            while j < len(toks) and toks[j] == "Oo":  # [ADDR:]PORT
                j += 1
            ar = toks[j + 1] if j + 1 < len(toks) and toks[j] == "Ar" else None
            flags.append((flag, value_for(flag, ar), depth == 0))
    return words, flags


def command_lines(text):
    """cotal(1): each `.It Nm Cm` line."""
    return [parse_line(line.split()[3:]) for line in text.splitlines()
            if line.startswith(".It Nm Cm ")]


def synopsis_forms(text):
    """cotal-deliveryd(8): each form of SYNOPSIS (from one `.Nm` to the
    next), `.Op X` read as `Oo X Oc`."""
    forms, cur, inside = [], None, False
    for line in text.splitlines():
        if line.startswith(".Sh "):
            inside = line.strip() == ".Sh SYNOPSIS"
            continue
        if not inside:
            continue
        if line.strip() == ".Nm":
            cur = []
            forms.append(cur)
        elif cur is not None and line.startswith(".Op "):
            cur += ["Oo"] + line.split()[1:] + ["Oc"]
        elif cur is not None and line.startswith("."):
            t = line.split()
            cur += [t[0][1:]] + t[1:]
    return [parse_line(f) for f in forms]


# A value each argument takes (by flag, then by its name in the page).
FLAG_VALUES = {"--cluster": "3", "--sync-interval": "always", "--profile": "delivery",
               "--creds-ttl": "3600", "--storage": "1G", "--metrics": "9100",
               "--port": "4222", "--route-port": "6222", "--node": "1", "--replicas": "1"}
ARG_VALUES = {"N": "1", "MS": "1000", "SECONDS": "3600", "SHA256HEX": "a" * 64, "SIZE": "1G",
              "EPOCH": str(int(time.time()) + 30 * 86400)}


def value_for(flag, ar):
    if ar is None:
        return None
    return FLAG_VALUES.get(flag) or ARG_VALUES.get(ar.split(",")[0]) or "x"


def run(argv, env, cwd):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=20)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return r.returncode, r.stdout + r.stderr


def accepted(argv, flag, env, cwd):
    rc, out = run(argv + [UNKNOWN], env, cwd)
    if rc is None:
        fail(f"{' '.join(argv)}: {out}")
        return
    refused_flag = (f'argument "{flag}"' in out or f'option "{flag}"' in out)
    refused_unknown = f'"{UNKNOWN}"' in out
    if refused_flag or not refused_unknown or rc != 2:
        fail(f"{' '.join(argv)} {UNKNOWN}: exit {rc}, the flag not accepted:\n{out.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--man", required=True)
    ap.add_argument("--cotal", required=True)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--version", required=True, help="what --version must say, e.g. 0.1.0")
    a = ap.parse_args()
    a.cotal, a.daemon = os.path.abspath(a.cotal), os.path.abspath(a.daemon)

    pages = {"cotal": os.path.join(a.man, "cotal.1"),
             "cotal-deliveryd": os.path.join(a.man, "cotal-deliveryd.8")}
    texts = {}
    for name, page in pages.items():
        groff_clean(page)
        with open(page, encoding="utf-8") as f:
            texts[name] = f.read()

    code = {"cotal": source_flags(a.src, ["cli/*.c", "launcher/*.c", "cotal/*.c"]),
            "cotal-deliveryd": source_flags(a.src, ["daemon/*.c", "supervisor/*.c", "host/*.c",
                                                      "metrics/*.c"])}
    for name in pages:
        documented = page_flags(texts[name])
        for f in sorted(code[name] - documented):
            fail(f"{name} takes {f}, its page does not name it")
        for f in sorted(documented - code[name]):
            fail(f"{name}'s page names {f}, the code takes no such flag")
        print(f"• {name}: {len(code[name])} flags in the code, {len(documented)} in its page")
    # bash completion offers what cotal(1) lists, and all of it.
    completion = os.path.join(os.path.dirname(os.path.abspath(a.man)), "bash-completion", "cotal")
    with open(completion, encoding="utf-8") as f:
        offered = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", f.read()))
    for f in sorted(offered ^ page_flags(texts["cotal"])):
        fail(f"{completion} and cotal(1) disagree on {f}")

    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "COTAL_HOME": os.path.join(tmp, "home"),
               "COTAL_NATS_SERVER": "/nonexistent/nats-server",
               "COTAL_DELIVERYD": "/nonexistent/cotal-deliveryd"}
        # A sanitizer build's settings reach the binaries (a leak fails).
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        n = 0
        env["COTAL_DELIVERYD"] = a.daemon  # cotal deliver runs it
        lines = [(a.cotal, w, f) for w, f in command_lines(texts["cotal"])]
        lines += [(a.daemon, w, f) for w, f in synopsis_forms(texts["cotal-deliveryd"])]
        for binary, words, flags in lines:
            for flag, value, _ in flags:
                if flag in INTERNAL:
                    continue
                if flag in ALONE:
                    rc, out = run([binary] + words + [flag], env, tmp)
                    if rc != 0:
                        fail(f"{os.path.basename(binary)} {flag}: exit {rc}:\n{out}")
                    continue
                argv = [binary] + words
                for other, v, required in flags:
                    if required and other != flag and other not in ALONE:
                        argv += [other] + ([v] if v is not None else [])
                argv += [flag] + ([value] if value is not None else [])
                accepted(argv, flag, env, tmp)
                n += 1
        # --help and --version: on stdout, exit 0, on every command.
        commands = {tuple(w) for w, _ in command_lines(texts["cotal"])}
        for words in [()] + sorted(commands):
            for flag, want in (("--help", "usage: cotal" + "".join(" " + w for w in words)),
                               ("--version", "cotal " + a.version)):
                r = subprocess.run([a.cotal, *words, flag], capture_output=True, text=True,
                                   env=env, cwd=tmp, timeout=20)
                if r.returncode != 0 or not r.stdout.startswith(want) or r.stderr:
                    fail(f"cotal {' '.join(words)} {flag}: exit {r.returncode}, stdout "
                         f"{r.stdout[:80]!r}, stderr {r.stderr[:80]!r}; want {want!r} on stdout "
                         f"and 0")
        for flag, want in (("--help", "usage: cotal-deliveryd"),
                           ("--version", "cotal-deliveryd " + a.version)):
            r = subprocess.run([a.daemon, flag], capture_output=True, text=True, env=env,
                               cwd=tmp, timeout=20)
            if r.returncode != 0 or not r.stdout.startswith(want) or r.stderr:
                fail(f"cotal-deliveryd {flag}: exit {r.returncode}; want {want!r} on stdout and 0")
        # A usage error: on stderr, exit 2.
        r = subprocess.run([a.cotal, "mesh", "init", UNKNOWN], capture_output=True, text=True,
                           env=env, cwd=tmp, timeout=20)
        if r.returncode != 2 or r.stdout or UNKNOWN not in r.stderr:
            fail(f"cotal mesh init {UNKNOWN}: exit {r.returncode}; want the refusal on stderr, 2")
        print(f"• --help and --version on {len(commands) + 1} cotal commands and the daemon")
        # 5. One table: --help, the usage line, the page and the completion.
        by_cmd = {}
        for w, fl in command_lines(texts["cotal"]):
            by_cmd.setdefault(tuple(w), set()).update(f for f, _, _ in fl)
        for words, page in sorted(by_cmd.items()):
            name = " ".join(words)
            r = subprocess.run([a.cotal, *words, "--help"], capture_output=True, text=True,
                               env=env, cwd=tmp, timeout=20)
            usage = [l for l in r.stdout.splitlines() if l.startswith(("usage: cotal", "       cotal"))]
            helped = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", "\n".join(usage)))
            listed = {l.split()[0] for l in r.stdout.splitlines() if l.startswith("  --")}
            r2 = subprocess.run([a.cotal, *words, UNKNOWN], capture_output=True, text=True,
                                env=env, cwd=tmp, timeout=20)
            ulines = [l for l in r2.stderr.splitlines() if l.startswith(("usage: cotal", "       cotal"))]
            used = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", "\n".join(ulines)))
            script = (f"source {completion}; COMP_WORDS=(cotal {name} --); "
                      f"COMP_CWORD={len(words) + 1}; _cotal; echo \"${{COMPREPLY[@]}}\"")
            r3 = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                                cwd=tmp, timeout=20)
            completed = set(r3.stdout.split()) - ALONE
            checks = [("--help's usage lines", helped), ("--help's flag list", listed),
                      ("the bash completion", completed)]
            # deliver hands its arguments to cotal-deliveryd: an error is the
            # daemon's, with the daemon's usage (checked against its page).
            if words != ("deliver",):
                checks.append(("the usage line after an error", used))
                if r2.returncode != 2 or not ulines:
                    fail(f"cotal {name} {UNKNOWN}: exit {r2.returncode}, no usage line on stderr")
            for what, got in checks:
                if got != page:
                    fail(f"cotal {name}: {what} {sorted(got)} but cotal(1) {sorted(page)}")
        exit_page = re.search(r"\.Sh EXIT STATUS\n(.*?)\.Sh ", texts["cotal"], re.S).group(1)
        r = subprocess.run([a.cotal, "status", "--help"], capture_output=True, text=True,
                           env=env, cwd=tmp, timeout=20)
        for code, when in re.findall(r"^  (\d)  (.*)$", r.stdout, re.M):
            if f".It {code}\n" not in exit_page or when not in exit_page:
                fail(f"cotal status --help says exit {code} \"{when}\"; cotal(1) does not")
        print(f"• {len(by_cmd)} commands: --help, usage, cotal(1) and the completion agree")
        print(f"• {n} flags run on their command lines")
    if failures:
        print(f"✗ {len(failures)} disagreements between the man pages and the code")
        return 1
    print("✓ the man pages and the code agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
