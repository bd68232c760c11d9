"""The kind backend of the local clusters: node images and cluster images built here.

No registry is reachable, so nothing is pulled: every image a kind cluster starts is
made here from programs compiled from the Go module proxy (hack/cluster/build --kind)
and Debian packages, and is present in the node image's containerd under the name the
cluster starts it with.
"""
import hashlib
import os

from clusterlib import HERE, tree_digest

KIND_DIR = os.path.join(HERE, "kind")
NODENET_SRC = os.path.join(KIND_DIR, "nodenet")
COREDNS_SRC = os.path.join(KIND_DIR, "coredns")
# CNI plugins of kind's base image: module sub-package -> binary.
CNI_PLUGINS = {"ipam/host-local": "host-local", "main/loopback": "loopback", "main/ptp": "ptp",
               "meta/portmap": "portmap"}


def nodenet_version():
    return "v0-" + tree_digest(NODENET_SRC)


# The health test driver (hack/healthdriver): this project's own kubelet plugin on the kubeletplugin helper of
# k8s.io/dynamic-resource-allocation (the version its go.mod pins), reporting device health from files on the node.
HEALTH_DRIVER_SRC = os.path.join(os.path.dirname(HERE), "healthdriver")
HEALTH_DRIVER = "dra-health-driver"
HEALTH_DRIVER_BINARY = "healthdriver"


def health_driver_version():
    """The health driver's cache version: a digest of its sources, go.mod and go.sum (which pin the helper)."""
    return "v0-" + tree_digest(HEALTH_DRIVER_SRC)


def coredns_version(versions):
    """The CoreDNS release with a digest of the plugin list it is built with (hack/cluster/kind/coredns)."""
    return f"{versions['COREDNS_VERSION']}-plugins-{tree_digest(COREDNS_SRC, 8)}"


# --- paths and versions ---------------------------------------------------------------------

def module_dir(module, version):
    """The module's directory in the Go module cache, downloading it from the proxy when missing."""
    from clusterlib import go_mod_download
    return go_mod_download(module, version)["Dir"]


def pause_tag(k8s_version):
    """The pause image tag of this Kubernetes release (its build/pause/Makefile)."""
    import re
    with open(os.path.join(module_dir("k8s.io/kubernetes", k8s_version), "build", "pause", "Makefile")) as fh:
        return re.search(r"^TAG \?= (\S+)", fh.read(), re.M).group(1)


def cluster_images(versions, k8s_version):
    """{role: image reference} of every image a kind cluster of this version starts."""
    return {
        "kube-apiserver": f"registry.k8s.io/kube-apiserver:{k8s_version}",
        "kube-controller-manager": f"registry.k8s.io/kube-controller-manager:{k8s_version}",
        "kube-scheduler": f"registry.k8s.io/kube-scheduler:{k8s_version}",
        "kube-proxy": f"registry.k8s.io/kube-proxy:{k8s_version}",
        # kubeadm's default tags name other releases; the kind config sets these (kubeadm_patches).
        "etcd": f"registry.k8s.io/etcd:{etcd_tag(versions)}",
        "coredns": f"registry.k8s.io/coredns/coredns:{versions['COREDNS_VERSION']}",
        "pause": f"registry.k8s.io/pause:{pause_tag(k8s_version)}",
        "nodenet": f"localhost/dra-admin/nodenet:{nodenet_version()}",
        "local-path-provisioner": f"localhost/dra-admin/local-path-provisioner:"
                                  f"{versions['LOCAL_PATH_PROVISIONER_VERSION']}",
        "local-path-helper": "localhost/dra-admin/local-path-helper:busybox",
        "dra-example-driver": driver_image(versions),
    }


def etcd_tag(versions):
    return versions["ETCD_VERSION"].lstrip("v") + "-0"


def driver_image(versions, tag=None):
    """The dra-example-driver image, named as its chart names it (image.repository, tag = appVersion)."""
    return f"registry.k8s.io/dra-example-driver/dra-example-driver:{tag or versions['DRA_EXAMPLE_DRIVER_VERSION']}"


def node_image(k8s_version):
    return f"localhost/dra-admin/kind-node:{k8s_version}"


CONTAINERS_CONF = os.path.join(KIND_DIR, "containers.conf")


def podman_env(network=None, base=None):
    """Environment for podman and kind: this project's containers.conf, the podman provider, the network."""
    env = dict(base or os.environ, CONTAINERS_CONF=CONTAINERS_CONF, KIND_EXPERIMENTAL_PROVIDER="podman")
    if network:
        env["KIND_EXPERIMENTAL_PODMAN_NETWORK"] = network
    return env


# --- image archives -------------------------------------------------------------------------
# Images are written as docker-archive tars (manifest.json + config + one layer), which
# `ctr images import`, `podman load` and `kind load image-archive` all read.

class Layer:
    """One image layer: files from the host, symlinks and directories, owned by root."""

    def __init__(self):
        self.entries = {}  # path in image -> (kind, source/target, mode)

    def _parents(self, path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.entries.setdefault("/".join(parts[:i]), ("dir", None, 0o755))

    def file(self, path, source, mode=None):
        self._parents(path)
        self.entries[path.strip("/")] = ("file", source, mode if mode is not None else
                                         (0o755 if os.access(source, os.X_OK) else 0o644))
        return self

    def data(self, path, content, mode=0o644):
        self._parents(path)
        self.entries[path.strip("/")] = ("data", content if isinstance(content, bytes) else content.encode(), mode)
        return self

    def symlink(self, path, target):
        self._parents(path)
        self.entries[path.strip("/")] = ("symlink", target, 0o777)
        return self

    def directory(self, path, mode=0o755):
        self._parents(path + "/x")
        self.entries[path.strip("/")] = ("dir", None, mode)
        return self

    def write(self, fh):
        import io
        import tarfile
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, source, mode = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mode, info.uid, info.gid, info.mtime = mode, 0, 0, 0
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type, info.linkname = tarfile.SYMTYPE, source
                    tar.addfile(info)
                elif kind == "data":
                    info.size = len(source)
                    tar.addfile(info, io.BytesIO(source))
                else:
                    info.size = os.path.getsize(source)
                    with open(source, "rb") as src:
                        tar.addfile(info, src)


def write_image_archive(path, refs, layer, entrypoint=None, cmd=None, env=None, labels=None, workdir="/"):
    """Write a single-layer image as a docker-archive tar at path, tagged with every name in refs."""
    import json
    import tarfile
    import tempfile
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, suffix=".layer") as layer_fh:
        layer.write(layer_fh)
        layer_fh.flush()
        layer_fh.seek(0)
        digest = hashlib.sha256()
        for chunk in iter(lambda: layer_fh.read(1 << 20), b""):
            digest.update(chunk)
        diff_id = digest.hexdigest()
        config = {
            "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
            "config": {"Env": env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                       "Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": workdir, "Labels": labels or {}},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff_id]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "dra-admin hack/cluster/kindlib.py"}],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        manifest = [{"Config": config_name, "RepoTags": list(refs), "Layers": [diff_id + "/layer.tar"]}]
        tmp = path + ".tmp"
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            def add_bytes(name, data):
                import io
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
            add_bytes(config_name, config_bytes)
            info = tarfile.TarInfo(diff_id + "/layer.tar")
            info.size, info.mode = os.path.getsize(layer_fh.name), 0o644
            layer_fh.seek(0)
            tar.addfile(info, layer_fh)
            add_bytes("manifest.json", json.dumps(manifest).encode())
        os.replace(tmp, path)
    return path


# --- the node's Debian root filesystem ------------------------------------------------------

# What kind's base image installs with apt (images/base/Dockerfile), minus the storage e2e
# extras (nfs-common, open-iscsi) and rootless helpers, plus Debian's runc (with seccomp),
# busybox-static (the local-path helper image and nodenet's `ip`) and python3 (Ansible
# modules run on the nodes: inventory/local.yml reaches them with the podman connection).
DEBIAN_PACKAGES = sorted([
    "systemd", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
    "libseccomp2", "e2fsprogs", "bash", "ca-certificates", "procps", "jq", "runc", "busybox-static", "python3",
    "python3-yaml",
])


def debian_mirror():
    """The host's Debian mirror (its apt sources), else deb.debian.org."""
    import glob
    import re
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*")):
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        for match in re.finditer(r"^(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s*$", text, re.M):
            return match.group(1)
        for match in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s", text, re.M):
            return match.group(1)
    return "http://deb.debian.org/debian"


def base_rootfs(versions, log):
    """A Debian root filesystem with kind's base packages (debootstrap), cached by suite and packages."""
    import shutil
    import subprocess
    import time
    from clusterlib import ClusterError, component_dir
    suite = versions["KIND_DEBIAN_SUITE"]
    key = hashlib.sha256(" ".join([suite] + DEBIAN_PACKAGES).encode()).hexdigest()[:12]
    dest = component_dir("kind-rootfs", f"{suite}-{key}")
    rootfs = os.path.join(dest, "rootfs")
    if os.path.exists(os.path.join(dest, ".built")):
        log(f"node rootfs {suite}: cached in {rootfs}")
        return rootfs
    if shutil.which("debootstrap") is None:
        raise ClusterError("debootstrap is missing: run hack/install-kind-deps (apt-get install debootstrap)")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    logfile = os.path.join(dest, "build.log")
    log(f"node rootfs {suite}: debootstrap (log: {logfile})")
    started = time.time()
    # Downloaded packages are kept for the next build (another package list or a rebuilt cache).
    debs = os.path.join(os.path.dirname(dest), "debootstrap-debs")
    os.makedirs(debs, exist_ok=True)
    with open(logfile, "w") as fh:
        rc = subprocess.run(["debootstrap", "--variant=minbase", "--cache-dir=" + debs,
                             "--include=" + ",".join(DEBIAN_PACKAGES), suite, rootfs, debian_mirror()],
                            stdout=fh, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise ClusterError(f"debootstrap {suite} failed (exit {rc}); log: {logfile}")
    # As kind's base image: no services but the ones the node enables, no kernel log in journald.
    for pattern in ("lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
                    "lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*",
                    "lib/systemd/system/local-fs.target.wants/*", "lib/systemd/system/sockets.target.wants/*udev*",
                    "lib/systemd/system/sockets.target.wants/*initctl*", "lib/systemd/system/basic.target.wants/*"):
        import glob
        for path in glob.glob(os.path.join(rootfs, pattern)):
            if os.path.islink(path) or os.path.isfile(path):
                os.unlink(path)
    with open(os.path.join(rootfs, "etc/systemd/journald.conf"), "a") as fh:
        fh.write("ReadKMsg=no\n")
    if not os.path.lexists(os.path.join(rootfs, "sbin/init")):
        os.symlink("/usr/lib/systemd/systemd", os.path.join(rootfs, "sbin/init"))
    for directory in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in os.listdir(os.path.join(rootfs, directory)):
            path = os.path.join(rootfs, directory, entry)
            if os.path.isfile(path):
                os.unlink(path)
    with open(os.path.join(dest, ".built"), "w") as fh:
        fh.write(f"{suite} {' '.join(DEBIAN_PACKAGES)} {time.time() - started:.0f}s\n")
    log(f"node rootfs {suite}: built in {time.time() - started:.0f}s")
    return rootfs


def run(cmd, **kwargs):
    """Run cmd; ClusterError with its output when it fails."""
    import subprocess
    from clusterlib import ClusterError
    res = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if res.returncode != 0:
        raise ClusterError(f"{' '.join(map(str, cmd))} failed (exit {res.returncode}): "
                           f"{(res.stdout + res.stderr).strip()[-1500:]}")
    return res.stdout


def rootfs_key(rootfs):
    """The cache key of a base rootfs (its cache directory's name)."""
    return os.path.basename(os.path.dirname(rootfs)).rsplit("-", 1)[-1]


def elf_dependencies(rootfs, binary):
    """Shared libraries (and the loader) binary needs, as paths inside rootfs (ldd run in a chroot)."""
    import re
    out = run(["chroot", rootfs, "ldd", binary])
    paths = set()
    for line in out.splitlines():
        match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if match:
            paths.add(match.group(1))
    return sorted(paths)


def in_rootfs(rootfs, path):
    """Host path of `path` inside rootfs, following symlinks (absolute ones relative to rootfs)."""
    from clusterlib import ClusterError
    parts = [p for p in path.split("/") if p]
    current, hops = rootfs, 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = os.path.dirname(current) if current != rootfs else rootfs
            continue
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise ClusterError(f"too many symlinks resolving {path} in {rootfs}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = rootfs
            parts = [p for p in target.split("/") if p] + parts
            continue
        current = candidate
    return current


def add_with_libraries(layer, rootfs, binaries):
    """Add binaries of rootfs and the shared libraries they load (dereferenced, at the paths the loader asks)."""
    for binary in binaries:
        layer.file(binary, in_rootfs(rootfs, binary), 0o755)
        for lib in elf_dependencies(rootfs, binary):
            layer.file(lib, in_rootfs(rootfs, lib), 0o755)


def kube_proxy_layer(rootfs, kube_bin):
    """kube-proxy with iptables in the mode kind's node entrypoint selects on a fresh node: it counts the
    rules of both backends and takes legacy on a tie (a new node's namespace has none)."""
    import glob
    layer = Layer().file("/usr/local/bin/kube-proxy", os.path.join(kube_bin, "kube-proxy"), 0o755)
    add_with_libraries(layer, rootfs, ["/usr/sbin/xtables-legacy-multi"])
    plugin_dir = "/usr/lib/x86_64-linux-gnu/xtables"
    for plugin in sorted(glob.glob(in_rootfs(rootfs, plugin_dir) + "/*.so")):
        path = plugin_dir + "/" + os.path.basename(plugin)
        layer.file(path, plugin, 0o644)
        # Matches such as `statistic` load libraries of their own (libm).
        for lib in elf_dependencies(rootfs, path):
            layer.file(lib, in_rootfs(rootfs, lib), 0o755)
    for name in ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"):
        layer.symlink("/usr/sbin/" + name, "xtables-legacy-multi")
    for name in ("etc/protocols", "etc/services", "etc/ld.so.cache"):
        if os.path.exists(os.path.join(rootfs, name)):
            layer.file("/" + name, os.path.join(rootfs, name), 0o644)
    return layer


def busybox_layer(rootfs, applets=None):
    """Debian's static busybox with a link per applet (all of them, or the ones named)."""
    busybox = in_rootfs(rootfs, "/bin/busybox")
    layer = Layer().file("/bin/busybox", busybox, 0o755)
    for applet in applets or run([busybox, "--list"]).split():
        if applet != "busybox":
            layer.symlink("/bin/" + applet, "busybox")
    return layer.directory("/tmp", 0o1777)


def pause_binary(k8s_version, dest_dir):
    """pause from this Kubernetes release's build/pause/linux/pause.c, linked statically."""
    source = os.path.join(module_dir("k8s.io/kubernetes", k8s_version), "build", "pause", "linux", "pause.c")
    os.makedirs(dest_dir, exist_ok=True)
    out = os.path.join(dest_dir, "pause")
    if not os.path.exists(out):
        tag = pause_tag(k8s_version)
        run(["gcc", "-Os", "-Wall", "-Werror", "-static", f'-DVERSION=v{tag}', "-o", out + ".tmp", source])
        run(["strip", out + ".tmp"])
        os.replace(out + ".tmp", out)
    return out


# Bump when a layer made from the rootfs changes recipe (its archive is cached under this key).
LAYER_RECIPES_VERSION = "2"


def image_archives(versions, k8s_version, rootfs, log):
    """Write (or reuse) one archive per cluster image; {reference: archive path}."""
    from clusterlib import CACHE_ROOT, component_bin
    images = cluster_images(versions, k8s_version)
    directory = os.path.join(CACHE_ROOT, "kind-images")
    kube_bin = os.path.dirname(component_bin("kubernetes", k8s_version, "kubelet"))
    rkey = rootfs_key(rootfs)

    def static(binary, path):
        return Layer().file(path, binary, 0o755)

    layers = {
        "kube-apiserver": (lambda: static(os.path.join(kube_bin, "kube-apiserver"), "/usr/local/bin/kube-apiserver"),
                           {}, ""),
        "kube-controller-manager": (lambda: static(os.path.join(kube_bin, "kube-controller-manager"),
                                                   "/usr/local/bin/kube-controller-manager"), {}, ""),
        "kube-scheduler": (lambda: static(os.path.join(kube_bin, "kube-scheduler"), "/usr/local/bin/kube-scheduler"),
                           {}, ""),
        "kube-proxy": (lambda: kube_proxy_layer(rootfs, kube_bin), {}, rkey),
        "etcd": (lambda: static(component_bin("etcd", versions["ETCD_VERSION"], "etcd"), "/usr/local/bin/etcd")
                 .directory("/var/lib/etcd", 0o700), {}, ""),
        "coredns": (lambda: static(component_bin("coredns", coredns_version(versions), "coredns"), "/coredns"),
                    {"entrypoint": ["/coredns"]}, coredns_version(versions)),
        "pause": (lambda: static(pause_binary(k8s_version, os.path.join(directory, "pause-" + k8s_version)), "/pause"),
                  {"entrypoint": ["/pause"]}, ""),
        "nodenet": (lambda: static(component_bin("nodenet", nodenet_version(), "nodenet"), "/usr/local/bin/nodenet")
                    .file("/bin/busybox", in_rootfs(rootfs, "/bin/busybox"), 0o755).symlink("/bin/ip", "busybox"),
                    {"entrypoint": ["/usr/local/bin/nodenet"]}, rkey),
        "local-path-provisioner": (lambda: static(component_bin("local-path-provisioner",
                                                                versions["LOCAL_PATH_PROVISIONER_VERSION"],
                                                                "local-path-provisioner"),
                                                  "/usr/local/bin/local-path-provisioner"), {}, ""),
        "local-path-helper": (lambda: busybox_layer(rootfs), {}, rkey),
    }
    archives = {images["dra-example-driver"]: driver_archives(versions, log)[images["dra-example-driver"]]}
    for role, ref in images.items():
        if role not in layers:
            continue
        make_layer, options, key = layers[role]
        if key:
            key = key + "-" + LAYER_RECIPES_VERSION
        name = ref.replace("/", "_").replace(":", "_") + (f"-{key}" if key else "") + ".tar"
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            log(f"image {ref}: writing {path}")
            write_image_archive(path, [ref], make_layer(), **options)
        archives[ref] = path
    return archives


DRIVER_COMMANDS = ("dra-example-kubeletplugin",)


def driver_layer(versions):
    from clusterlib import component_bin
    layer = Layer()
    for command in DRIVER_COMMANDS:
        layer.file("/usr/bin/" + command,
                   component_bin("dra-example-driver", versions["DRA_EXAMPLE_DRIVER_VERSION"], command), 0o755)
    return layer.directory("/tmp", 0o1777)


# --- the node image -------------------------------------------------------------------------

def kind_go_constant(kind_dir, relpath, name, images):
    """A string constant of kind's Go source (e.g. the default storage manifest), with the image
    constants it concatenates replaced by the references in `images` ({Go constant: reference})."""
    import re
    from clusterlib import ClusterError
    with open(os.path.join(kind_dir, relpath)) as fh:
        source = fh.read()
    match = re.search(r"^const " + name + r" = `(.*?)^`\s*$", source, re.M | re.S)
    if not match:
        raise ClusterError(f"no constant {name} in {relpath} of kind: its layout changed")
    text = match.group(1)
    for constant, ref in images.items():
        text = text.replace("` + " + constant + " + `", ref)
    if "` +" in text:
        raise ClusterError(f"{name} in {relpath} of kind names images this build does not know: {text[:200]}")
    return text


def write_file(path, content, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(content if isinstance(content, bytes) else content.encode())
    os.chmod(path, mode)


def containerd_config(kind_config, sandbox_image):
    """kind's containerd config with the sandbox image of this node, CDI on, and oom_score_adj clamped:
    where no process may lower its oom_score_adj, runc fails every sandbox unless containerd clamps it."""
    import re
    from clusterlib import ClusterError
    text, n_sandbox = re.subn(r'^(\s*sandbox_image\s*=\s*)"[^"]*"', rf'\1"{sandbox_image}"', kind_config, flags=re.M)
    text, n_oom = re.subn(r"^(\s*restrict_oom_score_adj\s*=\s*)false", r"\1true", text, flags=re.M)
    if n_sandbox != 1 or n_oom != 1 or not text.rstrip().endswith("restrict_oom_score_adj = true"):
        raise ClusterError("kind's etc/containerd/config.toml changed layout (sandbox_image, "
                           "restrict_oom_score_adj as the last key of the CRI section): update containerd_config")
    return text.rstrip() + ('\n  # Container Device Interface: DRA drivers hand devices to containers as CDI specs.\n'
                            '  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n')


def install_kind_base_files(kind_dir, rootfs):
    """kind's base image files (images/base/files of the pinned kind module) with its modes."""
    files = os.path.join(kind_dir, "images", "base", "files")
    for root, _dirs, names in os.walk(files):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), files)
            executable = rel.startswith(("usr/local/bin/", "kind/bin/"))
            with open(os.path.join(root, name), "rb") as fh:
                write_file(os.path.join(rootfs, rel), fh.read(), 0o755 if executable else 0o644)
    for directory in ("kind", "kind/bin"):
        os.chmod(os.path.join(rootfs, directory), 0o755)


def import_images(rootfs, archives, ctr, containerd, log):
    """Import the archives into the node's containerd store (rootfs/var/lib/containerd), as kind's node
    image build does (content only, pinned), with a containerd of the node's release run on this host."""
    import shutil
    import subprocess
    import tempfile
    import time
    from clusterlib import ClusterError, wait_for
    tmp = tempfile.mkdtemp(prefix="dra-admin-ctr-")
    sock = os.path.join(tmp, "containerd.sock")
    config = os.path.join(tmp, "config.toml")
    write_file(config, f'''version = 3
root = "{rootfs}/var/lib/containerd"
state = "{tmp}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
''')
    logfile = open(os.path.join(tmp, "containerd.log"), "w")
    proc = subprocess.Popen([containerd, "--config", config], stdout=logfile, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        def ready():
            if proc.poll() is not None:
                with open(logfile.name) as fh:
                    raise ClusterError(f"containerd exited: {fh.read()[-1500:]}")
            return os.path.exists(sock) and subprocess.run([ctr, "--address", sock, "version"],
                                                           capture_output=True).returncode == 0
        wait_for(ready, 60, "the image import's containerd to answer", interval=0.2)
        for ref, archive in sorted(archives.items()):
            run([ctr, "--address", sock, "--namespace", "k8s.io", "images", "import", "--all-platforms",
                 "--no-unpack", "--digests", "--label=io.cri-containerd.pinned=pinned", archive])
        present = set(run([ctr, "--address", sock, "--namespace", "k8s.io", "images", "list", "-q"]).split())
        missing = sorted(set(archives) - present)
        if missing:
            raise ClusterError(f"images missing from the node's containerd after import: {missing}")
        log(f"imported {len(archives)} images into the node's containerd")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logfile.close()
        shutil.rmtree(tmp, ignore_errors=True)
    del time


def node_inputs(versions, k8s_version, rootfs):
    """What a node image is made of; a change of any of it makes a new image."""
    digest = hashlib.sha256()
    for key in sorted(versions):
        digest.update(f"{key}={versions[key]}\n".encode())
    digest.update(f"{k8s_version} {rootfs_key(rootfs)} {tree_digest(KIND_DIR)}\n".encode())
    with open(os.path.abspath(__file__), "rb") as fh:
        digest.update(fh.read())
    return digest.hexdigest()[:16]


def podman_image_id(ref, env=None):
    import subprocess
    res = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True,
                         env=env or podman_env())
    return res.stdout.strip() if res.returncode == 0 else None


def build_node_image(versions, k8s_version, base, log):
    """The kind node image of k8s_version in podman's store (localhost/dra-admin/kind-node:<version>)."""
    import json
    import shutil
    import subprocess
    import time
    from clusterlib import ClusterError, component_bin, component_dir
    ref = node_image(k8s_version)
    dest = component_dir("kind-node", k8s_version)
    stamp = os.path.join(dest, ".built")
    inputs = node_inputs(versions, k8s_version, base)
    try:
        with open(stamp) as fh:
            built = json.load(fh)
    except (OSError, ValueError):
        built = {}
    if built.get("inputs") == inputs and built.get("image_id") and podman_image_id(ref) == built["image_id"]:
        log(f"node image {ref}: cached ({built['image_id'][:12]})")
        return ref
    started = time.time()
    log(f"node image {ref}: building")
    kind_dir = module_dir("sigs.k8s.io/kind", versions["KIND_VERSION"])
    images = cluster_images(versions, k8s_version)
    archives = image_archives(versions, k8s_version, base, log)
    rootfs = os.path.join(dest, "rootfs")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    run(["cp", "-a", base, rootfs])
    install_kind_base_files(kind_dir, rootfs)
    cfg_path = os.path.join(rootfs, "etc/containerd/config.toml")
    with open(cfg_path) as fh:
        write_file(cfg_path, containerd_config(fh.read(), images["pause"]))
    containerd_bin = os.path.dirname(component_bin("containerd", versions["CONTAINERD_VERSION"], "containerd"))
    for binary in ("containerd", "containerd-shim-runc-v2", "ctr"):
        shutil.copy(os.path.join(containerd_bin, binary), os.path.join(rootfs, "usr/local/bin", binary))
    shutil.copy(component_bin("crictl", versions["CRICTL_VERSION"], "crictl"), os.path.join(rootfs, "usr/local/bin"))
    os.makedirs(os.path.join(rootfs, "opt/cni/bin"), exist_ok=True)
    for plugin in CNI_PLUGINS.values():
        shutil.copy(component_bin("cni-plugins", versions["CNI_PLUGINS_VERSION"], plugin),
                    os.path.join(rootfs, "opt/cni/bin", plugin))
    for binary in ("kubelet", "kubeadm", "kubectl"):
        shutil.copy(component_bin("kubernetes", k8s_version, binary), os.path.join(rootfs, "usr/bin", binary))
    # The OCI spec containerd starts containers from: kind's hook, and no rlimits of its own.
    spec = json.loads(run([os.path.join(containerd_bin, "ctr"), "oci", "spec"]))
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    write_file(os.path.join(rootfs, "etc/containerd/cri-base.json"), json.dumps(spec, indent=2) + "\n")
    run(["chroot", rootfs, "systemctl", "enable", "kubelet.service", "containerd.service",
         "undo-mount-hacks.service"])
    run(["chroot", rootfs, "systemctl", "mask", "systemd-binfmt.service"])
    os.makedirs(os.path.join(rootfs, "etc/kubernetes/manifests"), exist_ok=True)
    write_file(os.path.join(rootfs, "kind/version"), k8s_version)
    with open(os.path.join(KIND_DIR, "default-cni.yaml")) as fh:
        write_file(os.path.join(rootfs, "kind/manifests/default-cni.yaml"),
                   fh.read().replace("NODENET_IMAGE", images["nodenet"]))
    write_file(os.path.join(rootfs, "kind/manifests/default-storage.yaml"),
               kind_go_constant(kind_dir, "pkg/build/nodeimage/const_storage.go", "defaultStorageManifest",
                                {"storageProvisionerImage": images["local-path-provisioner"],
                                 "storageHelperImage": images["local-path-helper"]}))
    import_images(rootfs, archives, os.path.join(containerd_bin, "ctr"), os.path.join(containerd_bin, "containerd"),
                  log)
    # One layer, as kind's own node images: tar the tree into podman's store.
    replaced = {built.get("image_id"), podman_image_id(ref)} - {None}
    tar = subprocess.Popen(["tar", "--numeric-owner", "--xattrs", "-C", rootfs, "-cf", "-", "."],
                           stdout=subprocess.PIPE)
    res = subprocess.run(["podman", "import",
                          "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                          "--change", "ENV container=docker", "--change", "STOPSIGNAL SIGRTMIN+3",
                          "--message", f"dra-admin kind node {k8s_version}", "-", ref],
                         stdin=tar.stdout, capture_output=True, text=True, env=podman_env())
    tar.stdout.close()
    if tar.wait() != 0 or res.returncode != 0:
        raise ClusterError(f"podman import of {ref} failed: {res.stderr.strip()[-800:]}")
    image_id = podman_image_id(ref)
    for old_id in replaced - {image_id}:
        # The image this one replaces (now untagged, whichever cache built it) would stay in podman's
        # store for good; one a container still runs from stays until that container is gone.
        subprocess.run(["podman", "rmi", old_id], capture_output=True, env=podman_env(), check=False)
    shutil.rmtree(rootfs)
    with open(stamp, "w") as fh:
        json.dump({"inputs": inputs, "image_id": image_id, "seconds": round(time.time() - started, 1)}, fh)
    log(f"node image {ref}: built in {time.time() - started:.0f}s ({image_id[:12]})")
    return ref


def build_images(versions, k8s_versions, log):
    """Everything the kind backend starts: one node image per Kubernetes version (holding every cluster
    image and the example driver's), and the driver image archives for `kind load image-archive`."""
    base = base_rootfs(versions, log)
    for k8s_version in k8s_versions:
        build_node_image(versions, k8s_version, base, log)
    driver_archives(versions, log)


# A second tag of the example driver (same programs, its own image), for seamless-upgrade tests.
DRIVER_UPGRADE_TAG_SUFFIX = "-dra-admin.1"


def driver_archives(versions, log):
    """{reference: archive} of the example driver's image under its release tag and an upgrade tag."""
    from clusterlib import CACHE_ROOT
    directory = os.path.join(CACHE_ROOT, "kind-images")
    release = versions["DRA_EXAMPLE_DRIVER_VERSION"]
    archives = {}
    for tag in (release, release + DRIVER_UPGRADE_TAG_SUFFIX):
        ref = driver_image(versions, tag)
        path = os.path.join(directory, ref.replace("/", "_").replace(":", "_") + ".tar")
        if not os.path.exists(path):
            log(f"image {ref}: writing {path}")
            write_image_archive(path, [ref], driver_layer(versions), labels={"dra-admin.tag": tag})
        archives[ref] = path
    return archives


def load_driver_upgrade_image(versions, cluster, log=print):
    """`kind load image-archive` of the driver's upgrade tag into every node of the cluster (the node
    images hold only the release tag). Returns the image reference."""
    from clusterlib import component_bin
    ref = driver_image(versions, versions["DRA_EXAMPLE_DRIVER_VERSION"] + DRIVER_UPGRADE_TAG_SUFFIX)
    archive = driver_archives(versions, log)[ref]
    kind_bin = component_bin("kind", versions["KIND_VERSION"], "kind")
    run([kind_bin, "load", "image-archive", archive, "--name", cluster], env=podman_env(network_name(cluster)))
    return ref


def health_driver_image():
    return f"localhost/dra-admin/{HEALTH_DRIVER}:{health_driver_version()}"


def health_driver_archive(log=print):
    """The health driver's image archive (written once per version from the built binary); its path."""
    from clusterlib import CACHE_ROOT, ClusterError, component_bin
    binary = component_bin(HEALTH_DRIVER, health_driver_version(), HEALTH_DRIVER_BINARY)
    if not os.access(binary, os.X_OK):
        raise ClusterError(f"{binary} is not built: run hack/cluster/build --kind --only {HEALTH_DRIVER}")
    ref = health_driver_image()
    path = os.path.join(CACHE_ROOT, "kind-images", ref.replace("/", "_").replace(":", "_") + ".tar")
    if not os.path.exists(path):
        log(f"image {ref}: writing {path}")
        layer = Layer().file("/usr/bin/" + HEALTH_DRIVER_BINARY, binary, 0o755).directory("/tmp", 0o1777)
        write_image_archive(path, [ref], layer, entrypoint=["/usr/bin/" + HEALTH_DRIVER_BINARY])
    return path


def load_health_driver_image(versions, cluster, log=print):
    """`kind load image-archive` of the health driver into every node of the cluster; the image reference."""
    from clusterlib import component_bin
    archive = health_driver_archive(log)
    kind_bin = component_bin("kind", versions["KIND_VERSION"], "kind")
    run([kind_bin, "load", "image-archive", archive, "--name", cluster], env=podman_env(network_name(cluster)))
    return health_driver_image()


# The images a kubeadm upgrade to a release asks each node for (the node images hold their own release's only).
UPGRADE_IMAGE_ROLES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "pause")


def load_release_images(versions, k8s_version, cluster, log=print):
    """`kind load image-archive` of a release's control-plane, kube-proxy and pause images into every node of the
    cluster, as a registry would serve them to `kubeadm upgrade`; the references loaded."""
    from clusterlib import component_bin
    archives = image_archives(versions, k8s_version, base_rootfs(versions, log), log)
    images = cluster_images(versions, k8s_version)
    kind_bin = component_bin("kind", versions["KIND_VERSION"], "kind")
    refs = [images[role] for role in UPGRADE_IMAGE_ROLES]
    for ref in refs:
        run([kind_bin, "load", "image-archive", archives[ref], "--name", cluster],
            env=podman_env(network_name(cluster)))
    return refs


# --- clusters ---------------------------------------------------------------------------------

KIND_CLUSTER_LABEL = "io.x-k8s.kind.cluster"


def network_name(cluster):
    """Each cluster gets a podman network of its own, removed with it."""
    return f"kind-{cluster}"


def node_names(cluster, workers):
    return [f"{cluster}-control-plane"] + [f"{cluster}-worker{'' if i == 1 else i}" for i in range(1, workers + 1)]


def kind_config(versions, k8s_version, workers, port=0, dra_gates=None, runtime_config=None):
    """The kind Cluster configuration: one control-plane node, `workers` workers, the etcd and CoreDNS
    tags this build made, kubelet allowed on cgroup v1, DRA gates/runtime-config only when given."""
    import yaml
    config = {
        "kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"apiServerAddress": "127.0.0.1", "apiServerPort": int(port)},
        "nodes": [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(workers)],
        "kubeadmConfigPatches": [
            yaml.safe_dump({"kind": "ClusterConfiguration",
                            "etcd": {"local": {"imageTag": etcd_tag(versions)}},
                            "dns": {"imageTag": versions["COREDNS_VERSION"]}}),
            # Kubelet >= 1.35 refuses cgroup v1 hosts unless told otherwise.
            yaml.safe_dump({"kind": "KubeletConfiguration", "failCgroupV1": False}),
        ],
    }
    if dra_gates:
        config["featureGates"] = dict(dra_gates)
    if runtime_config:
        config["runtimeConfig"] = dict(runtime_config)

    class Dumper(yaml.SafeDumper):
        pass
    Dumper.add_representer(str, lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))
    return yaml.dump(config, Dumper=Dumper, sort_keys=False)


# inotify instances a 3-node cluster needs: with one cluster up the host had 88 of 128 in use, and a
# second cluster failed (kubelet: "inotify_init: too many open files").
INOTIFY_PER_CLUSTER = 50


def inotify_instances():
    """(fs.inotify.max_user_instances, inotify instances open on this host), or (None, 0) when unreadable.
    Every node's processes run as root, so they all count against root's limit."""
    try:
        with open("/proc/sys/fs/inotify/max_user_instances") as fh:
            limit = int(fh.read())
    except (OSError, ValueError):
        return None, 0
    used = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                    used += 1
        except OSError:
            continue
    return limit, used


def host_problems(versions, k8s_version, port=0):
    """What keeps kind from running on this host, each with its fix (empty: nothing)."""
    import shutil
    import subprocess
    from clusterlib import component_bin, port_in_use
    problems = []
    deps = "hack/install-kind-deps (or: make kind-deps)"
    if os.geteuid() != 0:
        problems.append("kind runs as root here (rootless podman needs cgroup v2 delegation): run as root")
    if shutil.which("podman") is None:
        problems.append(f"podman is not installed: run {deps}")
    if shutil.which("runc") is None and not os.path.exists("/usr/sbin/runc"):
        problems.append(f"runc is not installed (crun cannot run on a hybrid cgroup v1 host): run {deps}")
    if not any(os.path.exists(p) for p in ("/usr/lib/podman/aardvark-dns", "/usr/libexec/podman/aardvark-dns")):
        problems.append(f"aardvark-dns is not installed (the nodes find each other by name through it): run {deps}")
    if not os.path.isdir("/lib/modules"):
        problems.append(f"/lib/modules does not exist (kind mounts it into every node): run {deps} "
                        f"(it creates the empty directory)")
    cgroup2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    if not cgroup2 and not os.path.isdir("/sys/fs/cgroup/systemd"):
        problems.append("cgroup v1 without a name=systemd hierarchy (systemd in the nodes needs it): mount one with "
                        "`mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup "
                        "/sys/fs/cgroup/systemd`, or boot with cgroup v2")
    limit, used = inotify_instances()
    if limit is not None and limit - used < INOTIFY_PER_CLUSTER:
        problems.append(f"only {limit - used} of fs.inotify.max_user_instances={limit} are free and a cluster of "
                        f"3 nodes needs about {INOTIFY_PER_CLUSTER} (systemd, containerd and the kubelet in each "
                        f"node; kubelets then fail with 'inotify_init: too many open files'): delete another "
                        f"kind cluster, or raise it (`sysctl -w fs.inotify.max_user_instances=512`)")
    if port and port_in_use(port):
        problems.append(f"port {port} (the API server's, --port) is in use: pick another or free it")
    kind = component_bin("kind", versions["KIND_VERSION"], "kind")
    if not os.access(kind, os.X_OK):
        problems.append(f"kind {versions['KIND_VERSION']} is not built: run make build-kind")
    if shutil.which("podman") and os.geteuid() == 0:
        res = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], capture_output=True,
                             text=True, env=podman_env())
        if res.returncode != 0:
            problems.append(f"podman does not work here: {res.stderr.strip()[-300:]}")
        elif podman_image_id(node_image(k8s_version)) is None:
            problems.append(f"node image {node_image(k8s_version)} is not built: run make build-kind")
    return problems


def podman_leftovers(cluster):
    """Containers, volumes and the network of a kind cluster still on the host: {kind: [names]}."""
    import subprocess
    env = podman_env()
    label = f"label={KIND_CLUSTER_LABEL}={cluster}"
    found = {}
    for kind, cmd in (("containers", ["podman", "ps", "-a", "--filter", label, "--format", "{{.Names}}"]),
                      ("volumes", ["podman", "volume", "ls", "--filter", label, "--format", "{{.Name}}"])):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        names = res.stdout.split() if res.returncode == 0 else []
        if names:
            found[kind] = names
    res = subprocess.run(["podman", "network", "exists", network_name(cluster)], env=env, capture_output=True)
    if res.returncode == 0:
        found["networks"] = [network_name(cluster)]
    return found


def delete_cluster(cluster, kind_bin, log=None):
    """`kind delete cluster`, then remove whatever of it is left (its network, labelled containers and
    volumes). Returns what had to be removed besides kind's own deletion."""
    import subprocess
    env = podman_env(network_name(cluster))
    if kind_bin and os.access(kind_bin, os.X_OK):
        subprocess.run([kind_bin, "delete", "cluster", "--name", cluster], env=env, capture_output=True)
    left = podman_leftovers(cluster)
    for name in left.get("containers", []):
        subprocess.run(["podman", "rm", "-f", "-v", name], env=env, capture_output=True)
    for name in left.get("volumes", []):
        subprocess.run(["podman", "volume", "rm", "-f", name], env=env, capture_output=True)
    for name in left.get("networks", []):
        subprocess.run(["podman", "network", "rm", "-f", name], env=env, capture_output=True)
    return left
