"""Two private Docker engines on this machine that behave like remote ones, for the tests of a
pool of engines: :class:`TlsEngine` (``tcp://127.0.0.1:PORT`` with mutual TLS) and
:class:`SshEngine` (``ssh://root@ADDRESS``: a dockerd and an sshd in a network namespace);
and :class:`SshHost`, the same namespace with its sshd and no dockerd, a host to reach over
ssh or an execnet socket server (xdist workers on another host).

Each engine is a small host of its own. One short temporary folder (``/tmp/okt-XXXXXXXX``; a
unix socket's path has at most 107 bytes) holds its data root, exec root, pidfile, logs,
certificates or keys, and its ``daemon.json`` (so the host's ``/etc/docker/daemon.json`` does
not apply), which on a dockerd older than 23 names the key the engine ID comes from (else all
engines of the host share ``/etc/docker/key.json``, hence one ID). Its containers' cgroup
parent is named like the folder. Each daemon is the first process of a PID namespace, in a
mount namespace whose ``/run`` is an empty tmpfs (:data:`ISOLATED`): what dockerd mounts and
what the shims and sshd keep under ``/run`` never reach the host, and SIGKILL to the daemon
ends everything it started, which the kernel reaps.

What a SIGKILLed dockerd leaves behind (Debian's docker.io 20.10, found by experiment, with
dockerd started as usual, without those namespaces):

- its managed containerd dies with it (a parent-death SIGKILL), reparented to init as a
  zombie until init reaps it;
- the containerd-shims and the containers' processes live on; the running containers'
  overlays, the data root's bind mount and ``<exec-root>/netns/default`` stay mounted, the
  shims' sockets stay in ``/run/containerd/s``, and the pidfiles stay;
- dockerd started again on the same folders takes a containerd whose pidfile names a process
  (even a zombie) for running and times out waiting for it; without that file it reconnects
  to live shims and stops their containers (SIGTERM, then SIGKILL after the stop timeout)
  before it answers, or cleans up after dead ones at once (unmounts, containers exited 255).

So :meth:`~_Engine.kill` ends the whole engine as a crashed host loses it (dockerd, containerd,
shims, containers) and removes the stale pidfiles, and :meth:`~_Engine.restart` answers again
at once with the images kept and the containers exited. Leaving an engine kills its daemons
and removes the cgroups (killed containers leave theirs), the network namespace with its veth
pair, and the folder. Daemons get SIGTERM when the test process dies without stopping them;
the folder, empty cgroup folders and an SshEngine's namespace (``ip netns del okt-...``) then
stay.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Self

import docker
import docker.errors
import docker.tls
import trustme

from pytest_openkata.local.sandbox import engine_answers
from pytest_openkata.local.steps import main_thread_death_preexec
from tests.support.docker_engine import BUSYBOX

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
SSHD = Path("/usr/sbin/sshd")
SERVER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
COMMANDS = ("dockerd", "containerd", "docker", "ip", "nsenter", "unshare", "ssh", "ssh-keygen")
CGROUPS = Path("/sys/fs/cgroup")
# Runs the rest of its command line as the first process of a PID namespace, in a mount
# namespace whose /run is an empty tmpfs (sshd needs /run/sshd), as on a host of its own.
# SIGKILL to that process ends every process of the namespace, which the kernel reaps; unshare
# reaps it, and sends it SIGTERM when unshare dies (unshare itself ignores SIGTERM).
ISOLATED = (
    "unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc",
    "--kill-child=SIGTERM",
    "sh", "-c", 'mount -t tmpfs -o mode=0755 tmpfs /run && mkdir /run/sshd && exec "$@"', "sh",
)  # fmt: skip
DOCKERD_FLAGS = (
    "--iptables=false",
    "--ip6tables=false",
    "--bridge=none",
    "--storage-driver=overlay2",
)


def missing_prerequisites() -> str | None:
    """Why the engines cannot run here, or None when they can."""
    if not sys.platform.startswith("linux"):
        return "the test engines need Linux"
    if os.geteuid() != 0:
        return "the test engines need root (dockerd, network namespaces)"
    missing = [name for name in COMMANDS if _which(name) is None]
    missing += [str(path) for path in (SSHD, BUSYBOX) if not path.is_file()]
    if missing:
        return (
            f"missing {', '.join(missing)} (apt-get install docker.io openssh-server iproute2 "
            "busybox-static)"
        )
    return None


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


class _Daemon:
    """A daemon started as the first process of a PID namespace (see :data:`ISOLATED`), in a
    session of its own. When this process dies, its ``unshare`` gets SIGKILL, and the daemon
    SIGTERM: it stops cleanly."""

    def __init__(
        self, command: list[str], log: Path, environment: Mapping[str, str] | None = None
    ) -> None:
        self.log = log
        with log.open("ab") as output:
            self._unshare = subprocess.Popen(
                command,
                env=None if environment is None else dict(environment),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=main_thread_death_preexec(signal.SIGKILL),  # noqa: PLW1509 (main thread)
            )

    @property
    def pid(self) -> int | None:
        """The daemon's process id here (1 in its own namespace), while it runs."""
        if self._unshare.poll() is not None:
            return None
        children = [
            pid for pid, (parent, _) in _live_processes().items() if parent == self._unshare.pid
        ]
        return children[0] if children else None

    def running(self) -> bool:
        return self._unshare.poll() is None

    def kill(self) -> None:
        """SIGKILL the daemon, which ends every process of its namespace, and reap it."""
        if not self.running():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid or self._unshare.pid, signal.SIGKILL)
        self._unshare.wait()


class _Engine:
    """What both engines share: the folder, the dockerd, killing and stopping them."""

    image = ""  # the stand-in image's tag, once a fixture built it into the engine

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="okt-"))
        self.name = self.folder.name  # also the cgroup parent (and SshEngine's namespace)
        self._dockerd: _Daemon | None = None
        self._daemons: list[_Daemon] = []  # all started, killed at the stop

    @property
    def pid(self) -> int | None:
        """dockerd's process id, while it runs."""
        return None if self._dockerd is None else self._dockerd.pid

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:  # an interruption too: nothing is left behind
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start(self) -> None:
        raise NotImplementedError

    def _enter(self) -> list[str]:
        """What dockerd's command line starts with: the namespaces it enters first."""
        return []

    def _hosts(self) -> list[str]:
        raise NotImplementedError

    def _tls_flags(self) -> list[str]:
        return []

    def _answers(self) -> bool:
        raise NotImplementedError

    def processes(self) -> set[int]:
        """Every live process of the engine: dockerd, containerd, the shims, the containers'
        processes (and an SshEngine's sshd with its sessions)."""
        return _tree(f"{self.folder}/")

    def kill(self) -> None:
        """Kill the engine abruptly, as a crashed host loses it: SIGKILL to dockerd ends its
        containerd, the shims and the containers' processes with it. :meth:`restart` brings it
        back."""
        if self._dockerd is not None:
            self._dockerd.kill()
            self._dockerd = None
        _kill(f"{self.folder / 'docker'}/")  # what an interrupted start may have left
        # A dockerd started again would take its own pid or another one of its new namespace
        # for the killed dockerd's or containerd's, still running: a rebooted host's are gone.
        for stale in ("docker.pid", "exec/containerd/containerd.pid"):
            (self.folder / "docker" / stale).unlink(missing_ok=True)

    def restart(self) -> None:
        """Start dockerd again on the same folders and address, after :meth:`kill`, and wait
        until it answers."""
        if self._dockerd is not None:
            raise RuntimeError("the engine runs: kill() it first")
        self._start_dockerd()

    def _start_dockerd(self) -> None:
        state = self.folder / "docker"
        state.mkdir(exist_ok=True)
        config = state / "daemon.json"
        settings = {"deprecated-key-path": str(state / "key.json")} if _has_trust_key() else {}
        config.write_text(json.dumps(settings))
        command = [
            "dockerd", "--config-file", str(config),
            *(f"--host={host}" for host in self._hosts()),
            "--data-root", str(state / "data"), "--exec-root", str(state / "exec"),
            "--pidfile", str(state / "docker.pid"), f"--cgroup-parent=/{self.name}",
            *DOCKERD_FLAGS, *self._tls_flags(),
        ]  # fmt: skip
        self._dockerd = self._spawn("dockerd", [*self._enter(), *ISOLATED, *command], self._answers)

    def _spawn(
        self,
        what: str,
        command: list[str],
        ready: Callable[[], bool],
        environment: Mapping[str, str] | None = None,
    ) -> _Daemon:
        """Start a daemon, logging to ``<folder>/<what>.log``, with ``environment`` (else this
        process's), and wait until it is ``ready``."""
        daemon = _Daemon(command, self.folder / f"{what}.log", environment)
        self._daemons.append(daemon)
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            if not daemon.running() or time.monotonic() > deadline:
                tail = "\n".join(daemon.log.read_text(errors="replace").splitlines()[-20:])
                raise RuntimeError(f"{what} did not start; end of {daemon.log}:\n{tail}")
            time.sleep(0.1)
        return daemon

    def stop(self) -> None:
        """Kill every process of the engine and remove what it made; safe to call again."""
        for daemon in self._daemons:
            daemon.kill()
        self._daemons.clear()
        self._dockerd = None
        _kill(f"{self.folder}/")  # what an interrupted start may have left
        _remove_cgroups(self.name)
        self._remove_network()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _remove_network(self) -> None:
        pass


class TlsEngine(_Engine):
    """A dockerd on ``tcp://127.0.0.1:PORT`` that takes only clients with a certificate of its
    own CA (``--tlsverify``). :attr:`cert_path` holds the client's side in Docker's
    ``DOCKER_CERT_PATH`` layout (``ca.pem``, ``cert.pem``, ``key.pem``)."""

    def __init__(self) -> None:
        super().__init__()
        self.port = _free_port()
        self.url = f"tcp://127.0.0.1:{self.port}"
        self.cert_path = self.folder / "client"
        self._server = self.folder / "server"

    @property
    def environment(self) -> dict[str, str]:
        """The variables with which ``docker.from_env()`` (and the plugin) reach the engine."""
        return {
            "DOCKER_HOST": self.url,
            "DOCKER_TLS_VERIFY": "1",
            "DOCKER_CERT_PATH": str(self.cert_path),
        }

    def tls_config(self) -> docker.tls.TLSConfig:
        return docker.tls.TLSConfig(
            client_cert=(str(self.cert_path / "cert.pem"), str(self.cert_path / "key.pem")),
            ca_cert=str(self.cert_path / "ca.pem"),
            verify=True,
        )

    def client(self, timeout: int = 60) -> docker.DockerClient:
        """A client with the engine's client certificate. With REQUESTS_CA_BUNDLE or
        CURL_CA_BUNDLE set, requests would verify the engine against that bundle instead of
        ``ca.pem`` (docker/docker-py#2433), so the client is made without them and ignores the
        environment afterwards."""
        with _environment(REQUESTS_CA_BUNDLE=None, CURL_CA_BUNDLE=None):
            client = docker.DockerClient(base_url=self.url, tls=self.tls_config(), timeout=timeout)
        client.api.trust_env = False
        return client

    def _start(self) -> None:
        ca = trustme.CA()
        self.cert_path.mkdir()
        self._server.mkdir()
        ca.cert_pem.write_to_path(str(self.cert_path / "ca.pem"))
        for folder, identities in ((self._server, ("127.0.0.1", "localhost")),
                                   (self.cert_path, ("client.okt.invalid",))):  # fmt: skip
            issued = ca.issue_cert(*identities)
            issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
            issued.private_key_pem.write_to_path(str(folder / "key.pem"))
        self._start_dockerd()

    def _hosts(self) -> list[str]:
        return [self.url]

    def _tls_flags(self) -> list[str]:
        return [
            "--tlsverify", f"--tlscacert={self.cert_path / 'ca.pem'}",
            f"--tlscert={self._server / 'cert.pem'}", f"--tlskey={self._server / 'key.pem'}",
        ]  # fmt: skip

    def _answers(self) -> bool:
        try:
            with contextlib.closing(self.client(timeout=5)) as client:
                client.ping()
        except (docker.errors.DockerException, OSError):
            return False
        return True


class SshHost(_Engine):
    """A network namespace (:attr:`name`) linked to the host by a veth pair on a private /30,
    with an sshd inside it and no dockerd: a second host that clients reach only over ssh at
    :attr:`address` as root, such as an execnet gateway or an xdist worker (``--tx ssh=…``,
    :meth:`execnet_spec`), or through an execnet socket server while :meth:`socket_server`
    runs one (``--tx socket=…``). It shares this machine's file system, not its network.

    :attr:`home` is a HOME for clients: ``.ssh/config`` (user, key, known hosts for
    :attr:`address`) and ``.ssh/known_hosts`` (sshd's host key), which paramiko, hence the
    Docker SDK, reads from ``$HOME``; OpenSSH and execnet take :attr:`ssh_config` as ``-F``
    and ``ssh_config=``. :attr:`root_address` is the host's end of the link: a server
    listening there is reachable from the namespace.

    A session's environment is sshd's own (``PATH``, ``HOME``, ``USER``…) plus
    ``session_environment``, set by sshd's ``SetEnv`` as a remote host's login environment
    would be: nothing of the client's environment reaches it (sshd accepts no ``SendEnv``).
    """

    def __init__(self, session_environment: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.interface = f"{self.name}-n"  # inside the namespace
        self.root_interface = f"{self.name}-r"
        self.root_address, self.address = _free_subnet()
        self.home = self.folder / "home"
        self.ssh_config = self.home / ".ssh" / "config"
        self.session_environment = dict(session_environment or {})
        self._ssh = self.folder / "ssh"
        self._servers = 0

    def execnet_spec(self, python: str = sys.executable) -> str:
        """An execnet gateway spec (also xdist's ``--tx``) for ``python`` in the namespace."""
        return f"ssh=root@{self.address}//ssh_config={self.ssh_config}//python={python}"

    @contextlib.contextmanager
    def socket_server(
        self, python: str = sys.executable, environment: Mapping[str, str] | None = None
    ) -> Iterator[str]:
        """An execnet socket server (``python -m execnet.script.socketserver ADDRESS:PORT``) in
        the namespace while the block runs, with only ``environment`` and a ``PATH``; gives
        its gateway spec (also xdist's ``--tx``), ``socket=ADDRESS:PORT``. It runs the
        gateways of its connections in its own process, one after the other: a run that
        needs a fresh process takes a fresh server."""
        self._servers += 1
        port, what = 8800 + self._servers, f"socketserver-{self._servers}"
        variables = {"PATH": SERVER_PATH, "HOME": "/root", **(environment or {})}
        server = [python, "-u", "-m", "execnet.script.socketserver"]
        command = ["ip", "netns", "exec", self.name, *ISOLATED, *server]
        log = self.folder / f"{what}.log"
        daemon = self._spawn(
            what,
            [*command, f"{self.address}:{port}"],
            lambda: "Entering Accept loop" in log.read_text(errors="replace"),
            variables,
        )
        try:
            yield f"socket={self.address}:{port}"
        finally:
            daemon.kill()
            self._daemons.remove(daemon)

    def _start(self) -> None:
        self._ssh.mkdir()
        (self.home / ".ssh").mkdir(mode=0o700, parents=True)
        host_key = _keygen(self._ssh / "host_key")
        client_key = _keygen(self.home / ".ssh" / "id_ed25519")
        self._add_network()
        self._start_services()
        self._start_sshd(client_key)
        (self.home / ".ssh" / "known_hosts").write_text(f"{self.address} {host_key}\n")
        self.ssh_config.write_text(
            f"Host {self.address}\n"
            "    User root\n"
            f"    IdentityFile {self.home / '.ssh' / 'id_ed25519'}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.home / '.ssh' / 'known_hosts'}\n"
            "    StrictHostKeyChecking yes\n"
            "    BatchMode yes\n"
        )
        self.ssh_config.chmod(0o600)

    def _start_services(self) -> None:
        """What runs in the namespace besides sshd, started before it."""

    def _session_variables(self) -> dict[str, str]:
        """The variables sshd sets in every session."""
        return dict(self.session_environment)

    def _add_network(self) -> None:
        inside = ["ip", "-n", self.name]
        for command in (
            ["ip", "netns", "add", self.name],
            ["ip", "link", "add", self.root_interface, "type", "veth",
             "peer", "name", self.interface, "netns", self.name],
            ["ip", "addr", "add", f"{self.root_address}/30", "dev", self.root_interface],
            ["ip", "link", "set", self.root_interface, "up"],
            [*inside, "addr", "add", f"{self.address}/30", "dev", self.interface],
            [*inside, "link", "set", self.interface, "up"],
            [*inside, "link", "set", "lo", "up"],
        ):  # fmt: skip
            _run(command)

    def _remove_network(self) -> None:
        # The names are this engine's own (its folder's), so nothing else is removed.
        for command in (
            ["ip", "link", "delete", self.root_interface],
            ["ip", "netns", "delete", self.name],
        ):
            subprocess.run(command, capture_output=True, check=False)

    def _start_sshd(self, client_key: str) -> None:
        authorized_keys = self._ssh / "authorized_keys"
        authorized_keys.write_text(f"{client_key}\n")
        config = self._ssh / "sshd_config"
        lines = [
            f"ListenAddress {self.address}",
            f"HostKey {self._ssh / 'host_key'}",
            f"PidFile {self._ssh / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "PrintLastLog no",
            # A pool's clients open many channels (one per Docker API connection).
            "MaxSessions 100",
            "MaxStartups 100",
        ]
        variables = self._session_variables()
        if variables:
            # sshd takes the first SetEnv line only: every variable goes on it.
            lines.append("SetEnv " + " ".join(_sshd_word(f"{k}={v}") for k, v in variables.items()))
        config.write_text("".join(f"{line}\n" for line in lines))
        command = ["ip", "netns", "exec", self.name, *ISOLATED, str(SSHD), "-D", "-e", "-f"]
        self._spawn("sshd", [*command, str(config)], self._sshd_answers)

    def _sshd_answers(self) -> bool:
        try:
            with socket.create_connection((self.address, 22), timeout=2) as connection:
                return connection.recv(4).startswith(b"SSH-")
        except OSError:
            return False


class SshEngine(SshHost):
    """An :class:`SshHost` with a dockerd inside its namespace. The engine answers at
    :attr:`url` (``ssh://root@ADDRESS``): sshd runs ``docker system dial-stdio`` against the
    engine's socket, as the Docker SDK asks over ssh (every session has ``DOCKER_HOST``)."""

    def __init__(self, session_environment: Mapping[str, str] | None = None) -> None:
        super().__init__(session_environment)
        self.url = f"ssh://root@{self.address}"
        self.socket = self.folder / "docker" / "docker.sock"

    @property
    def environment(self) -> dict[str, str]:
        """The variables with which the Docker SDK (and the plugin) reach the engine."""
        return {"DOCKER_HOST": self.url, "HOME": str(self.home)}

    def client(self, timeout: int = 60) -> docker.DockerClient:
        """A client over ssh (paramiko), which reads its settings from :attr:`home` as it is
        made; HOME is restored afterwards."""
        with _environment(HOME=str(self.home)):
            return docker.DockerClient(base_url=self.url, timeout=timeout)

    def _start_services(self) -> None:
        self._start_dockerd()

    def _session_variables(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}", **self.session_environment}

    def _enter(self) -> list[str]:
        # Not `ip netns exec`: it mounts a new /sys, without the cgroup file systems dockerd needs.
        return ["nsenter", f"--net=/run/netns/{self.name}"]

    def _hosts(self) -> list[str]:
        return [f"unix://{self.socket}"]

    def _answers(self) -> bool:
        return engine_answers(f"unix://{self.socket}")


# --- helpers --------------------------------------------------------------------------------


@contextlib.contextmanager
def _environment(**changes: str | None) -> Iterator[None]:
    """``os.environ`` with ``changes`` (None removes a variable) while the block runs."""
    saved = {name: os.environ.get(name) for name in changes}
    try:
        _set_environment(changes)
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@functools.cache
def _has_trust_key() -> bool:
    """Whether dockerd takes its engine ID from a trust key (before Docker 23)."""
    version = subprocess.run(
        ["dockerd", "--version"], capture_output=True, text=True, check=False
    ).stdout
    found = re.search(r"version (\d+)\.", version)
    return found is not None and int(found.group(1)) < 23


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _free_subnet() -> tuple[str, str]:
    """A /30 in 10.213.0.0/16 that no interface of the host uses: (host's end, namespace's)."""
    used = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    while True:
        prefix, base = f"10.213.{secrets.randbelow(256)}", 4 * secrets.randbelow(64)
        if f"inet {prefix}.{base + 1}/" not in used:
            return f"{prefix}.{base + 1}", f"{prefix}.{base + 2}"


def _keygen(path: Path) -> str:
    """A new ed25519 key pair at ``path``; its public key (type and key, no comment)."""
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "okt", "-f", str(path)])
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def _sshd_word(text: str) -> str:
    """``text`` as one word of an sshd_config line (quoted when it holds blanks)."""
    if '"' in text or "\n" in text:
        raise ValueError(f"sshd_config cannot hold {text!r}")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(command)}` exited with {result.returncode}: {result.stderr.strip()}"
        )


def _live_processes() -> dict[int, tuple[int, str]]:
    """Every live process (zombies left out): its parent's id and its command line."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, parent = (entry / "stat").read_text().rpartition(")")[2].split()[:2]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):  # gone meanwhile
            continue
        if state != "Z":
            found[int(entry.name)] = (int(parent), command)
    return found


def _tree(marker: str) -> set[int]:
    """The live processes whose command line names ``marker`` (a folder of an engine), and
    all their descendants (containers, sshd's sessions)."""
    processes = _live_processes()
    chosen = {pid for pid, (_, command) in processes.items() if marker in command}
    chosen.discard(os.getpid())
    while True:
        children = {pid for pid, (parent, _) in processes.items() if parent in chosen}
        if children <= chosen:
            return chosen
        chosen |= children


def _kill(marker: str) -> None:
    """SIGKILL the processes of :func:`_tree` until none is left alive."""
    deadline = time.monotonic() + STOP_TIMEOUT
    while pids := _tree(marker):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {sorted(pids)} of {marker} outlive SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _remove_cgroups(parent: str) -> None:
    """Remove the cgroups under ``/parent`` (an engine's cgroup parent) in every hierarchy;
    those of containers killed behind dockerd's back are left otherwise."""
    tops = {path.resolve() for path in (CGROUPS / parent, *CGROUPS.glob(f"*/{parent}"))}
    deadline = time.monotonic() + STOP_TIMEOUT
    for top in tops:
        for folder, _, _ in os.walk(top, topdown=False):
            while True:
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy while its last tasks exit
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
