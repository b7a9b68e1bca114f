"""Git: a bare mirror per suite, fetches, commit resolution, worktrees, ancestry.

Every git call goes through the subprocess gateway with an argv list. Refs that come from outside
(a branch from the config, a SHA from the CLI or a trigger) are validated before git sees them and
passed after ``--end-of-options``, so a ref can never be read as an option.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zlops.errors import ConfigError, GitError, ProcessError
from zlops.host import proc
from zlops.redact import redact_text, redact_url, register_secret, split_credentials

log = logging.getLogger(__name__)

SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
#: THE rule for a commit a person names (``zlops nightly --sha``, the nightly DAGs' trigger form, a PR
#: compare's ref): a full or short SHA, 7 to 64 lower-case hex characters. Its regex body, its
#: JSON-schema pattern (the trigger form's), and the words every refusal uses.
COMMIT_SHA = "[0-9a-f]{7,64}"
COMMIT_SHA_PATTERN = f"^{COMMIT_SHA}$"
COMMIT_SHA_ACCEPTS = "a full or short commit SHA: 7 to 64 lower-case hex characters like 1a2b3c4"
_COMMIT_SHA_RE = re.compile(COMMIT_SHA)  # fullmatch: `$` would also take a trailing newline
_BRANCH_RE = re.compile(r"^(?!-)(?!.*\.\.)(?!.*@\{)(?!.*//)[A-Za-z0-9._/-]{1,200}(?<!\.lock)(?<![/.])$")
FETCH_TIMEOUT_S = 900.0
GIT_TIMEOUT_S = 300.0


#: the credential helper of a mirror whose URL carried credentials: it answers git's ``get`` from the two
#: variables below, which only that git process's environment holds (never argv, never a file, never config)
_ENV_HELPER = ('!f() { test "$1" = get || exit 0; printf "username=%s\\npassword=%s\\n" '
               '"$ZLOPS_GIT_USERNAME" "$ZLOPS_GIT_PASSWORD"; }; f')


def _git_env(credentials: tuple[str, str] | None = None) -> dict[str, str]:
    # never prompt for credentials in a nightly; English messages so errors read the same everywhere;
    # build_env limits git to file/git/http/https/ssh (GIT_ALLOW_PROTOCOL: no fd::, no ext::). The
    # operator's own GIT_ASKPASS (and the credential helpers of their git config) still answer git.
    extra = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_ASKPASS": os.environ.get("GIT_ASKPASS") or "/bin/true"}
    if credentials is not None:
        extra.update(ZLOPS_GIT_USERNAME=credentials[0], ZLOPS_GIT_PASSWORD=credentials[1])
    return proc.build_env(extra)


def git(args: Sequence[str], *, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S,
        what: str | None = None, credentials: tuple[str, str] | None = None) -> str:
    """Run one git command and return its stdout; failures raise GitError with git's own message
    (redacted: zlops.redact). ``credentials`` (user, password) answer git's credential request
    through the environment of this one process (:data:`_ENV_HELPER`)."""
    argv = ["git", *(("-c", "credential.helper=", "-c", f"credential.helper={_ENV_HELPER}")
                     if credentials is not None else ()), *args]
    try:
        done = proc.run(argv, cwd=cwd, env=_git_env(credentials), timeout=timeout,
                        what=what or f"git {args[0]}")
    except ProcessError as exc:
        detail = exc.stderr_tail.strip() or (str(exc).splitlines() or [f"exit code {exc.returncode}"])[0]
        raise GitError(redact_text(f"{what or 'git ' + args[0]} failed: {detail}",
                                   credentials or ())) from None
    return done.stdout


def validate_branch(name: str) -> str:
    """A branch name safe to hand to git: strict pattern, then ``git check-ref-format --branch``."""
    if not isinstance(name, str) or not _BRANCH_RE.match(name) or any(ord(c) < 32 for c in name):
        raise GitError(f"invalid branch name {name!r}: use letters, digits and . _ / - "
                       "(no leading '-', no '..', '@{', '//', trailing '/' '.' or '.lock')")
    try:
        git(["check-ref-format", "--branch", name], what="git check-ref-format")
    except GitError:
        raise GitError(f"invalid branch name {name!r}: git check-ref-format refuses it") from None
    return name


@dataclass(frozen=True)
class Mirror:
    """A bare mirror of one suite's upstream under ``home/mirrors``. ``url`` never carries credentials
    (it is what the mirror's config stores and what messages show); ``credentials`` taken out of the
    configured URL reach git only through its environment (:func:`git`)."""

    path: Path
    url: str
    credentials: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    def git(self, *args: str, timeout: float = GIT_TIMEOUT_S, what: str | None = None) -> str:
        return git(["-C", str(self.path), *args], timeout=timeout, what=what, credentials=self.credentials)


def mirror_of(url: str, path: Path) -> Mirror:
    """The :class:`Mirror` at ``path`` of the configured ``url`` (credentials split off, zlops.redact)."""
    clean, user, password = split_credentials(url)
    if password is not None:
        register_secret(password)
        if user == password:
            register_secret(user)
    return Mirror(path, clean, (user or "", password) if password is not None else None)


def ensure_mirror(url: str, path: Path) -> Mirror:
    """Create the bare mirror if needed (``git init --bare`` + remote) and keep its URL current.

    The URL stored in the mirror's config is the configured one without its credentials (a token in
    ``https://user:TOKEN@host/repo.git``); they are handed to each fetch through its environment."""
    if url.startswith("-"):
        raise GitError(f"invalid repository URL {redact_url(url)!r}")
    mirror = mirror_of(url, path)
    if not (path / "HEAD").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        git(["init", "--bare", "--quiet", str(tmp)], what="git init")
        git(["-C", str(tmp), "remote", "add", "origin", "--", mirror.url], what="git remote add")
        tmp.rename(path)
        log.info("created mirror %s of %s", path, mirror.url)
    url = mirror.url
    current = mirror.git("config", "--get", "remote.origin.url").strip()
    if current != url:
        mirror.git("remote", "set-url", "origin", "--", url)
    return mirror


def fetch_branch(mirror: Mirror, branch: str, *, timeout: float = FETCH_TIMEOUT_S) -> str:
    """Fetch ``branch`` from origin into ``refs/heads/<branch>`` and return its head SHA."""
    validate_branch(branch)
    try:
        mirror.git("fetch", "--prune", "--no-tags", "--quiet", "origin",
                   f"+refs/heads/{branch}:refs/heads/{branch}", timeout=timeout, what="git fetch")
    except GitError as exc:
        raise GitError(f"cannot fetch branch {branch!r} from {mirror.url}: {exc}") from exc
    return resolve(mirror, f"refs/heads/{branch}")


def fetch_commit(mirror: Mirror, sha: str, *, timeout: float = FETCH_TIMEOUT_S) -> None:
    """Make sure a commit named by full SHA is present (fetching it by id when the server allows)."""
    if has_commit(mirror, sha):
        return
    try:
        mirror.git("fetch", "--no-tags", "--quiet", "origin", sha, timeout=timeout, what="git fetch")
    except GitError as exc:
        raise GitError(f"commit {sha} is not on the fetched branch and cannot be fetched by id: {exc}") from exc


def has_commit(mirror: Mirror, rev: str) -> bool:
    try:
        mirror.git("cat-file", "-e", f"{rev}^{{commit}}", what="git cat-file")
    except GitError:
        return False
    return True


def resolve(mirror: Mirror, rev: str) -> str:
    """Full SHA of a revision (a ref, or a full or abbreviated SHA)."""
    if not rev or rev.startswith("-") or any(ord(c) < 32 for c in rev):
        raise GitError(f"invalid revision {rev!r}")
    try:
        out = mirror.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
                         what="git rev-parse")
    except GitError:
        raise GitError(f"unknown revision {rev!r} in {mirror.url}") from None
    sha = out.strip()
    if not SHA_RE.match(sha):
        raise GitError(f"git rev-parse gave an unexpected answer for {rev!r}: {sha!r}")
    return sha


def looks_like_sha(rev: str) -> bool:
    """Whether ``rev`` is a commit SHA by :data:`COMMIT_SHA_PATTERN` (7 to 64 lower-case hex characters)."""
    return isinstance(rev, str) and _COMMIT_SHA_RE.fullmatch(rev) is not None


def check_commit_sha(text: str, *, what: str = "sha") -> str:
    """``text`` when it is a commit SHA by :data:`COMMIT_SHA_PATTERN`, else ConfigError (a usage error:
    exit 2) naming ``what`` and what it accepts."""
    if not looks_like_sha(text):
        raise ConfigError(f"{what}: expected {COMMIT_SHA_ACCEPTS}, got {text!r}")
    return text


def ancestors(mirror: Mirror, sha: str, *, max_count: int) -> list[str]:
    """``sha`` and its ancestors, nearest first (at most ``max_count``)."""
    out = mirror.git("rev-list", f"--max-count={int(max_count)}", "--end-of-options", sha, what="git rev-list")
    return [line for line in out.split() if line]


def first_parent_line(mirror: Mirror, branch: str, *, max_count: int) -> list[str]:
    """The branch's first-parent line, newest first (at most ``max_count`` commits): the commits the
    branch itself moved through, without the commits of merged side branches."""
    validate_branch(branch)
    out = mirror.git("rev-list", "--first-parent", f"--max-count={int(max_count)}", "--end-of-options",
                     f"refs/heads/{branch}", what="git rev-list --first-parent")
    return [line for line in out.split() if line]


def is_ancestor(mirror: Mirror, a: str, b: str) -> bool:
    """Whether commit ``a`` is an ancestor of (or the same as) commit ``b``."""
    try:
        mirror.git("merge-base", "--is-ancestor", "--end-of-options", a, b, what="git merge-base --is-ancestor")
    except GitError:
        return False
    return True


def first_parent_range(mirror: Mirror, good: str, bad: str, *, max_commits: int) -> list[str]:
    """``[good, c1, ..., bad]``: ``good`` and the first-parent commits after it up to ``bad``, oldest first.

    Both must be full SHAs; ``good`` must be on ``bad``'s first-parent line (the commits the branch
    moved through), and the range at most ``max_commits`` long, else GitError says which.
    """
    for name, sha in (("good", good), ("bad", bad)):
        if not SHA_RE.match(sha):
            raise GitError(f"{name} commit: expected a full SHA, got {sha!r}")
    if not is_ancestor(mirror, good, bad):
        raise GitError(f"{good[:12]} is not an ancestor of {bad[:12]}: no range to bisect")
    out = mirror.git("rev-list", "--first-parent", f"--max-count={int(max_commits) + 1}", "--end-of-options",
                     bad, f"^{good}", what="git rev-list --first-parent")
    newest_first = [line for line in out.split() if line]
    if len(newest_first) > max_commits:
        raise GitError(f"the range {good[:12]}..{bad[:12]} holds more than {max_commits} first-parent commits "
                       "(bisect.max_commits)")
    if not newest_first:
        return [good]
    oldest = newest_first[-1]
    parent = mirror.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{oldest}^1",
                        what="git rev-parse").strip()
    if parent != good:
        raise GitError(f"{good[:12]} is not on the first-parent line of {bad[:12]} (it was merged from a side "
                       "branch): bisect between nights of the branch itself")
    return [good, *reversed(newest_first)]


def commit_author(mirror: Mirror, sha: str) -> str:
    """``Name <email>`` of a commit's author."""
    return mirror.git("log", "-1", "--format=%an <%ae>", "--end-of-options", sha, what="git log").strip()


def merge_base(mirror: Mirror, a: str, b: str) -> str:
    return mirror.git("merge-base", "--end-of-options", a, b, what="git merge-base").strip()


def changed_paths(mirror: Mirror, a: str, b: str) -> list[str]:
    """The paths whose content differs between commits ``a`` and ``b`` (renames as a deletion and an addition)."""
    out = mirror.git("diff", "--name-only", "--no-renames", "-z", "--end-of-options", a, b, what="git diff")
    return [p for p in out.split("\0") if p]


def commit_subject(mirror: Mirror, sha: str) -> str:
    return mirror.git("log", "-1", "--format=%s", "--end-of-options", sha, what="git log").strip()


def add_worktree(mirror: Mirror, sha: str, path: Path) -> Path:
    """A detached worktree of ``sha`` at ``path``; reused when it is already there at that commit."""
    if not SHA_RE.match(sha):
        raise GitError(f"add_worktree needs a full SHA, got {sha!r}")
    if path.exists():
        try:
            head = git(["-C", str(path), "rev-parse", "HEAD"], what="git rev-parse").strip()
        except GitError:
            head = ""
        if head == sha:
            return path
        remove_worktree(mirror, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mirror.git("worktree", "prune", what="git worktree prune")
    mirror.git("worktree", "add", "--detach", "--force", "--quiet", str(path), sha, what="git worktree add")
    return path


def remove_worktree(mirror: Mirror, path: Path) -> None:
    """Remove a worktree (and anything built inside it); never fails because it is already gone."""
    if path.exists():
        try:
            mirror.git("worktree", "remove", "--force", "--force", str(path), what="git worktree remove")
        except GitError as exc:
            log.warning("git worktree remove failed (%s); deleting %s", exc, path)
        shutil.rmtree(path, ignore_errors=True)
    try:
        mirror.git("worktree", "prune", what="git worktree prune")
    except GitError as exc:  # the mirror itself may be gone; nothing left to prune then
        log.warning("git worktree prune failed: %s", exc)
