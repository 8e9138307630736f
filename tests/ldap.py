"""A real LDAP directory for the tests: Debian's slapd, started on a free port with its own
configuration and database in a temporary folder, holding people and groups (groupOfNames)
that a test adds and removes with Debian's ldap-utils. Missing slapd fails the tests that use
it; it is never a reason to skip."""

import shutil
import subprocess
import time
from pathlib import Path

from tests.helpers import free_port

SUFFIX = "dc=example,dc=org"
ADMIN = f"cn=admin,{SUFFIX}"
SECRET = "directory-secret"
SLAPD = "/usr/sbin/slapd"

CONFIG = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {root}/slapd.pid
database mdb
maxsize 104857600
suffix "{suffix}"
rootdn "{admin}"
rootpw {secret}
directory {root}/data
"""

BASE = """dn: {suffix}
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,{suffix}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{suffix}
objectClass: organizationalUnit
ou: groups
"""


class Directory:
    def __init__(self, root: Path):
        assert Path(SLAPD).exists(), "slapd is needed (Debian's slapd and ldap-utils)"
        assert shutil.which("ldapadd"), "ldapadd is needed (Debian's ldap-utils)"
        self.root = root
        (root / "data").mkdir(parents=True)
        (root / "slapd.conf").write_text(CONFIG.format(root=root, suffix=SUFFIX, admin=ADMIN,
                                                       secret=SECRET))
        self.port = free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        subprocess.run([SLAPD, "-f", str(root / "slapd.conf"), "-h", self.uri], check=True,
                       capture_output=True, timeout=30)
        for _ in range(100):
            if self._run("ldapsearch", "-b", SUFFIX, "-s", "base").returncode in (0, 32):
                break
            time.sleep(0.1)
        self.add(BASE.format(suffix=SUFFIX))

    def _run(self, tool: str, *args: str, text: str | None = None):
        return subprocess.run([tool, "-x", "-H", self.uri, "-D", ADMIN, "-w", SECRET, *args],
                              input=text, capture_output=True, text=True, timeout=30)

    def add(self, ldif: str) -> None:
        done = self._run("ldapadd", text=ldif)
        assert done.returncode == 0, done.stderr

    def modify(self, ldif: str) -> None:
        done = self._run("ldapmodify", text=ldif)
        assert done.returncode == 0, done.stderr

    def delete(self, dn: str) -> None:
        done = self._run("ldapdelete", dn)
        assert done.returncode == 0, done.stderr

    def person(self, uid: str, password: str, mail: str) -> str:
        dn = f"uid={uid},ou=people,{SUFFIX}"
        self.add(f"dn: {dn}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n"
                 f"mail: {mail}\nuserPassword: {password}\n")
        return dn

    def group(self, name: str, *members: str) -> str:
        dn = f"cn={name},ou=groups,{SUFFIX}"
        self.add(f"dn: {dn}\nobjectClass: groupOfNames\ncn: {name}\n"
                 + "".join(f"member: {m}\n" for m in members))
        return dn

    def stop(self) -> None:
        pid = (self.root / "slapd.pid").read_text().strip()
        subprocess.run(["kill", pid], check=False)
        for _ in range(50):
            if not (self.root / "slapd.pid").exists():
                break
            time.sleep(0.1)
