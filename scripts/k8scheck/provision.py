"""What cert-manager and the kubelet provide a pod, made locally: a CA and
certificates shaped like the Certificates of optional/cert-manager
(openssl), and volume directories written as the kubelet's AtomicWriter
writes them (a `..data` symlink swapped atomically).

Must not start processes other than openssl, and must not report results.
"""

import os
import secrets
import shutil
import subprocess
import time


def openssl(*args, cwd):
    p = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {p.stderr}")


def make_key(path, spec, cwd):
    pk = (spec or {}).get("privateKey", {})
    if pk.get("algorithm", "RSA").upper() == "ECDSA":
        curve = {256: "prime256v1", 384: "secp384r1", 521: "secp521r1"}[pk.get("size", 256)]
        # cert-manager's default encoding (PKCS1) is SEC1 for EC keys.
        openssl("ecparam", "-name", curve, "-genkey", "-noout", "-out", path, cwd=cwd)
    else:
        openssl("genrsa", "-traditional", "-out", path, str(pk.get("size", 2048)), cwd=cwd)


class Pki:
    """A CA and certificates shaped like cert-manager's, made with openssl."""

    def __init__(self, d, certs):
        self.d = d
        self.by_secret = {c["spec"]["secretName"]: c for c in certs if c["kind"] == "Certificate"}
        os.makedirs(d, exist_ok=True)
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=k8s-check CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
        self.issue("client", None, ["URI:spiffe://example.org/k8s-check/client"], "clientAuth")

    def path(self, name):
        return os.path.join(self.d, name)

    def issue(self, name, spec, sans, eku):
        d = self.d
        make_key(f"{name}.key", spec, d)
        cn = (spec or {}).get("commonName", name)
        openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
                cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={','.join(sans)}\nextendedKeyUsage={eku}\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "basicConstraints=CA:FALSE\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
                cwd=d)

    def secret(self, name):
        """The files of Secret `name`: tls.crt, tls.key, ca.crt (a new key each time)."""
        spec = self.by_secret.get(name, {}).get("spec", {})
        # Exactly the names of the Certificate: like a pod IP in a
        # cluster, 127.0.0.1 is in a certificate only if it lists it (etcd's
        # does), so a missing --parent-tls-server-name fails here too.
        if spec:
            sans = [f"DNS:{n}" for n in spec.get("dnsNames", [])]
            sans += [f"IP:{ip}" for ip in spec.get("ipAddresses", [])]
        else:
            sans = [f"DNS:{name}", "DNS:localhost", "IP:127.0.0.1"]
        self.issue(name, spec, sans, "serverAuth,clientAuth")
        return {key: open(self.path(f)).read()
                for key, f in (("tls.crt", f"{name}.crt"), ("tls.key", f"{name}.key"),
                               ("ca.crt", "ca.crt"))}


def atomic_write(dirpath, files, mode, group=None):
    """The kubelet's AtomicWriter: files in a timestamped directory, a
    `..data` symlink to it swapped atomically, and per-key symlinks
    through `..data`. With `group` (the pod's fsGroup, for a container
    that runs as another user), the files and directories belong to that
    group, as the kubelet makes them."""
    os.makedirs(dirpath, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + secrets.token_hex(4)
    target = os.path.join(dirpath, stamp)
    os.mkdir(target)
    if group is not None:
        for d in (dirpath, target):
            os.chown(d, -1, group)
            os.chmod(d, 0o2755)
    for key, content in files.items():
        p = os.path.join(target, key)
        with open(p, "w") as f:
            f.write(content)
        os.chmod(p, mode)
        if group is not None:
            os.chown(p, -1, group)
    old = os.path.realpath(os.path.join(dirpath, "..data")) if os.path.islink(
        os.path.join(dirpath, "..data")) else None
    tmp = os.path.join(dirpath, "..data_tmp")
    os.symlink(stamp, tmp)
    os.rename(tmp, os.path.join(dirpath, "..data"))
    for key in files:
        link = os.path.join(dirpath, key)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", key), link)
    if old and os.path.basename(old) != stamp:
        shutil.rmtree(old)

