"""Runs a `ccp-sim sweep` on Ray: one Ray task per run.

`ccp-sim sweep --executor ray` embeds this file, writes it and the sweep's plan (JSON) into a
temporary directory and runs `PYTHON ccp_sim_ray.py PLAN.json`; it is not meant to be run by hand.
The plan names the ccp-sim binary the workers run, the input files (the scenario and the files it
references, by their path relative to a common root and their path here), and per run its
directory here and its overrides, in order.

The binary and the input files go into Ray's object store once; each task writes them into a
private temporary directory on its worker, runs `ccp-sim run SCENARIO --out OUT --set ...` there and
returns the files of OUT. A run that fails (non-zero exit, a lost worker) is retried once by Ray,
then reported as failed. This process writes each finished run's files into its directory and
says so on its standard output, one JSON object per line (the protocol below); everything else it
or Ray prints goes to its standard error.

  {"event": "note", "message": TEXT}
  {"event": "connected", "ray": VERSION, "address": ADDRESS, "nodes": N, "cpus": N}
  {"event": "submitted", "runs": N}
  {"event": "done", "job": I, "node": HOSTNAME}
  {"event": "failed", "job": I, "error": TEXT, "stderr": TEXT or null}
  {"event": "fatal", "kind": "plan" | "import" | "unreachable" | "connect" | "other", "message": TEXT}

Exit status: 0 once every run is done or failed, 2 after a fatal event.
"""

import json
import os
import socket
import sys

# A project tool does not opt its users into Ray's usage reports; RAY_USAGE_STATS_ENABLED=1 does.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


class RunFailed(Exception):
    """`ccp-sim run` exited non-zero: args are its exit status and its standard error (as args,
    which is what survives the exception's trip back through pickle)."""

    def __str__(self):
        return f"ccp-sim run exited with status {self.args[0]}"


def run_one(binary, inputs, scenario, overrides, plots):
    """A Ray task: one `ccp-sim run` in a private directory; returns the output files."""
    import shutil
    import subprocess
    import tempfile

    work = tempfile.mkdtemp(prefix="ccp-sim-ray-")
    try:
        exe = os.path.join(work, "ccp-sim")
        with open(exe, "wb") as f:
            f.write(binary)
        os.chmod(exe, 0o755)
        root = os.path.join(work, "in")
        for d in inputs["dirs"]:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        for rel, data in inputs["files"].items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        out = os.path.join(work, "out")
        cmd = [exe, "run", os.path.join(root, scenario), "--out", out, "--quiet"]
        if not plots:
            cmd.append("--no-plots")
        for o in overrides:
            cmd += ["--set", o]
        p = subprocess.run(cmd, cwd=root, stdin=subprocess.DEVNULL, capture_output=True)
        if p.returncode != 0:
            raise RunFailed(p.returncode, p.stderr.decode(errors="replace"))
        files = {}
        for dirpath, _, names in os.walk(out):
            for n in names:
                path = os.path.join(dirpath, n)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, out)] = f.read()
        return {"files": files, "node": socket.gethostname()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def reachable(address):
    """None if a TCP connection to ADDRESS's host and port opens, else why not."""
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return None  # "auto", "local": Ray's to interpret
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return None
    except OSError as e:
        return str(e) or type(e).__name__


def inside(root, rel):
    """ROOT/REL for a file name a worker returned, refusing one that would land outside ROOT."""
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm in (".", "..") or norm.startswith(".." + os.sep):
        raise ValueError(f"a worker returned the file name {rel!r}, which is outside the run's directory")
    return os.path.join(root, norm)


def failure(e):
    """A failed task's message and ccp-sim's standard error, from Ray's exception."""
    cause = getattr(e, "cause", None) or e
    # By name: the class came back through pickle, not necessarily as this module's object.
    if type(cause).__name__ == "RunFailed" and len(cause.args) == 2:
        return f"ccp-sim run exited with status {cause.args[0]}", cause.args[1]
    lines = [l for l in str(cause).strip().splitlines() if l.strip()]
    return (lines[-1] if lines else type(cause).__name__), None


def main():
    # The protocol keeps the real standard output; Ray's prints (C++ included) go to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(**kv):
        proto.write(json.dumps(kv) + "\n")
        proto.flush()

    def fatal(kind, message):
        emit(event="fatal", kind=kind, message=message)
        return 2

    with open(sys.argv[1]) as f:
        plan = json.load(f)
    try:
        import ray
        from ray.exceptions import RayError
    except ImportError as e:
        return fatal("import", f"{type(e).__name__}: {e}")
    if ray.__version__ != plan["ray_version"]:
        emit(event="note", message=f"{sys.executable} has Ray {ray.__version__}; ccp-sim is tested with {plan['ray_version']}")

    address = plan["address"]
    if address:
        why = reachable(address)
        if why:
            return fatal("unreachable", why)
    try:
        ray.init(address=address, logging_level="WARNING")
    except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError...
        return fatal("connect", f"{type(e).__name__}: {e}")
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        emit(event="connected", ray=ray.__version__, address=address or "(ray.init's default)",
             nodes=len(nodes), cpus=ray.cluster_resources().get("CPU", 0))

        try:
            with open(plan["binary"], "rb") as f:
                binary = ray.put(f.read())
            files = {}
            for entry in plan["files"]:
                with open(entry["source"], "rb") as f:
                    files[entry["path"]] = f.read()
        except OSError as e:
            return fatal("plan", str(e))
        inputs = ray.put({"files": files, "dirs": plan["dirs"]})

        task = ray.remote(run_one).options(num_cpus=1, max_retries=1, retry_exceptions=True)
        pending = {}
        for job in plan["jobs"]:
            ref = task.remote(binary, inputs, plan["scenario"], job["overrides"], plan["plots"])
            pending[ref] = job
        emit(event="submitted", runs=len(pending))

        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except RayError as e:
                    error, stderr = failure(e)
                    emit(event="failed", job=job["job"], error=error, stderr=stderr)
                    continue
                try:
                    for rel, data in result["files"].items():
                        path = inside(job["dir"], rel)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "wb") as f:
                            f.write(data)
                except (OSError, ValueError) as e:
                    emit(event="failed", job=job["job"], error=str(e), stderr=None)
                    continue
                emit(event="done", job=job["job"], node=result["node"])
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
