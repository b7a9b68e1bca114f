"""gitops against real repositories made in a temp dir: mirror, fetch, resolve, worktrees, ancestry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from local_git import LocalRepo, git

from zlops.errors import GitError
from zlops.host import gitops, proc


@pytest.fixture
def upstream(tmp_path: Path) -> LocalRepo:
    return LocalRepo(tmp_path / "upstream")


@pytest.fixture
def mirror(tmp_path: Path, upstream: LocalRepo) -> gitops.Mirror:
    return gitops.ensure_mirror(str(upstream.path), tmp_path / "home" / "mirrors" / "demo.git")


def test_mirror_fetch_resolves_the_branch_head(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    sha = upstream.commit({"a.txt": "1"})
    assert gitops.fetch_branch(mirror, "main") == sha
    assert (mirror.path / "HEAD").exists() and git(mirror.path, "rev-parse", "--is-bare-repository") == "true"
    assert gitops.resolve(mirror, "main") == sha


def test_a_new_upstream_commit_is_seen_after_the_next_fetch(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    first = upstream.commit({"a.txt": "1"})
    assert gitops.fetch_branch(mirror, "main") == first
    second = upstream.commit({"a.txt": "2"})
    assert not gitops.has_commit(mirror, second)
    assert gitops.resolve(mirror, "main") == first
    assert gitops.fetch_branch(mirror, "main") == second
    assert gitops.has_commit(mirror, second)


def test_ensure_mirror_is_idempotent_and_follows_a_new_url(tmp_path: Path, upstream: LocalRepo) -> None:
    path = tmp_path / "m.git"
    m1 = gitops.ensure_mirror(str(upstream.path), path)
    m2 = gitops.ensure_mirror(str(upstream.path), path)
    assert m1 == m2
    moved = tmp_path / "moved"
    upstream.path.rename(moved)
    gitops.ensure_mirror(str(moved), path)
    assert git(path, "config", "--get", "remote.origin.url") == str(moved)


def test_ensure_mirror_refuses_an_option_as_url(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="invalid repository URL"):
        gitops.ensure_mirror("--upload-pack=touch x", tmp_path / "m.git")
    assert not (tmp_path / "m.git").exists()


def test_abbreviated_sha_resolves_to_the_full_one(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    sha = upstream.commit({"a.txt": "1"})
    gitops.fetch_branch(mirror, "main")
    assert gitops.resolve(mirror, sha[:8]) == sha
    assert gitops.resolve(mirror, sha.upper()[:10].lower()) == sha
    assert gitops.looks_like_sha(sha[:8]) and not gitops.looks_like_sha("main")


@pytest.mark.parametrize("rev", ["deadbeefdeadbeef", "no-such-branch", "main~5"])
def test_unknown_revision_is_a_clear_git_error(upstream: LocalRepo, mirror: gitops.Mirror, rev: str) -> None:
    upstream.commit({"a.txt": "1"})
    gitops.fetch_branch(mirror, "main")
    with pytest.raises(GitError, match=rf"unknown revision '{rev}' in {mirror.url}"):
        gitops.resolve(mirror, rev)


@pytest.mark.parametrize("rev", ["", "--all", "a\nb"])
def test_resolve_refuses_option_like_revisions(mirror: gitops.Mirror, rev: str) -> None:
    with pytest.raises(GitError, match="invalid revision"):
        gitops.resolve(mirror, rev)


def test_unreachable_upstream_names_the_url(tmp_path: Path) -> None:
    url = str(tmp_path / "does-not-exist")
    mirror = gitops.ensure_mirror(url, tmp_path / "m.git")
    with pytest.raises(GitError) as ei:
        gitops.fetch_branch(mirror, "main")
    assert url in str(ei.value) and "cannot fetch branch 'main'" in str(ei.value)


def test_missing_branch_upstream_is_a_git_error(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    upstream.commit({"a.txt": "1"})
    with pytest.raises(GitError, match="cannot fetch branch 'nightly'"):
        gitops.fetch_branch(mirror, "nightly")


REFUSED = ["--upload-pack=x", "a;rm -rf /", "../x", "main..dev", "@{-1}", "", "a\x01b", "x.lock", "-x",
           "a b", "a//b", "dev/", "dev.", "main\n", "$(id)", "a~1", "a^", "a:b"]


@pytest.mark.parametrize("name", REFUSED)
def test_validate_branch_refuses_before_git_runs(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(proc, "run", lambda argv, **kw: calls.append(argv))
    with pytest.raises(GitError, match="invalid branch name"):
        gitops.validate_branch(name)
    assert calls == []


@pytest.mark.parametrize("name", ["--upload-pack=touch pwned", "a;touch pwned", "@{-1}"])
def test_fetch_of_a_refused_branch_never_reaches_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    upstream: LocalRepo, name: str) -> None:
    upstream.commit({"a.txt": "1"})
    mirror = gitops.ensure_mirror(str(upstream.path), tmp_path / "m.git")
    calls: list[Any] = []
    real_run = proc.run

    def recording_run(argv: Any, **kw: Any) -> proc.Completed:
        calls.append(argv)
        return real_run(argv, **kw)

    monkeypatch.setattr(proc, "run", recording_run)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GitError, match="invalid branch name"):
        gitops.fetch_branch(mirror, name)
    assert calls == []
    assert not (tmp_path / "pwned").exists()


def test_a_name_git_refuses_is_refused_although_the_pattern_allows_it() -> None:
    with pytest.raises(GitError, match="check-ref-format refuses"):
        gitops.validate_branch("feature/.hidden")


@pytest.mark.parametrize("name", ["feature/JIRA-1_fix.v2", "release/3.3", "main", "v1.2.3"])
def test_validate_branch_accepts_ordinary_names(name: str) -> None:
    assert gitops.validate_branch(name) == name


def test_fetch_commit_by_id_from_another_branch(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    base = upstream.commit({"a.txt": "1"})
    upstream.checkout("-b", "dev")
    dev = upstream.commit({"b.txt": "1"}, "dev work")
    upstream.checkout("main")
    gitops.fetch_branch(mirror, "main")
    gitops.fetch_commit(mirror, base)  # already there: nothing to do
    assert not gitops.has_commit(mirror, dev)
    gitops.fetch_commit(mirror, dev)
    assert gitops.has_commit(mirror, dev)
    assert gitops.commit_subject(mirror, dev) == "dev work"


def test_fetch_commit_of_an_unknown_sha_fails_clearly(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    upstream.commit({"a.txt": "1"})
    gitops.fetch_branch(mirror, "main")
    with pytest.raises(GitError, match="cannot be fetched by id"):
        gitops.fetch_commit(mirror, "0123456789abcdef0123456789abcdef01234567")


@pytest.fixture
def two_commits(upstream: LocalRepo, mirror: gitops.Mirror) -> tuple[str, str]:
    a = upstream.commit({"v.txt": "A"})
    b = upstream.commit({"v.txt": "B"})
    gitops.fetch_branch(mirror, "main")
    return a, b


def test_worktree_is_checked_out_at_the_sha(tmp_path: Path, mirror: gitops.Mirror,
                                           two_commits: tuple[str, str]) -> None:
    a, _ = two_commits
    wt = gitops.add_worktree(mirror, a, tmp_path / "wt" / a[:12])
    assert (wt / "v.txt").read_text() == "A"
    assert git(wt, "rev-parse", "HEAD") == a
    assert str(wt) in git(mirror.path, "worktree", "list")


def test_worktree_is_reused_when_already_at_the_sha(tmp_path: Path, mirror: gitops.Mirror,
                                                   two_commits: tuple[str, str]) -> None:
    a, _ = two_commits
    wt = gitops.add_worktree(mirror, a, tmp_path / "wt")
    (wt / "built.marker").write_text("extension built here")
    assert gitops.add_worktree(mirror, a, tmp_path / "wt") == wt
    assert (wt / "built.marker").exists()


def test_worktree_at_another_sha_is_recreated(tmp_path: Path, mirror: gitops.Mirror,
                                             two_commits: tuple[str, str]) -> None:
    a, b = two_commits
    wt = gitops.add_worktree(mirror, a, tmp_path / "wt")
    (wt / "built.marker").write_text("x")
    gitops.add_worktree(mirror, b, wt)
    assert (wt / "v.txt").read_text() == "B" and not (wt / "built.marker").exists()
    assert git(wt, "rev-parse", "HEAD") == b


def test_add_worktree_needs_a_full_sha(tmp_path: Path, mirror: gitops.Mirror, two_commits: tuple[str, str]) -> None:
    with pytest.raises(GitError, match="needs a full SHA"):
        gitops.add_worktree(mirror, two_commits[0][:12], tmp_path / "wt")
    with pytest.raises(GitError, match="needs a full SHA"):
        gitops.add_worktree(mirror, "main", tmp_path / "wt")


def test_remove_worktree(tmp_path: Path, mirror: gitops.Mirror, two_commits: tuple[str, str]) -> None:
    wt = gitops.add_worktree(mirror, two_commits[0], tmp_path / "wt")
    (wt / "untracked.bin").write_text("build output")
    gitops.remove_worktree(mirror, wt)
    assert not wt.exists()
    assert str(wt) not in git(mirror.path, "worktree", "list")


def test_remove_worktree_whose_directory_is_already_gone(tmp_path: Path, mirror: gitops.Mirror,
                                                        two_commits: tuple[str, str]) -> None:
    import shutil

    wt = gitops.add_worktree(mirror, two_commits[0], tmp_path / "wt")
    shutil.rmtree(wt)
    gitops.remove_worktree(mirror, wt)
    assert str(wt) not in git(mirror.path, "worktree", "list")
    # the stale registration is gone, so the same path can be used again
    assert gitops.add_worktree(mirror, two_commits[1], wt) == wt
    assert (wt / "v.txt").read_text() == "B"


def test_ancestors_nearest_first_and_max_count(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    shas = [upstream.commit({"n.txt": str(i)}, f"c{i}") for i in range(5)]
    gitops.fetch_branch(mirror, "main")
    assert gitops.ancestors(mirror, shas[-1], max_count=100) == shas[::-1]
    assert gitops.ancestors(mirror, shas[-1], max_count=2) == [shas[4], shas[3]]
    assert gitops.ancestors(mirror, shas[2], max_count=100) == [shas[2], shas[1], shas[0]]


def test_merge_base_of_a_branch_and_main(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    upstream.commit({"n.txt": "0"})
    fork = upstream.commit({"n.txt": "1"})
    upstream.checkout("-b", "dev")
    dev = upstream.commit({"d.txt": "1"})
    upstream.checkout("main")
    main = upstream.commit({"n.txt": "2"})
    gitops.fetch_branch(mirror, "main")
    gitops.fetch_branch(mirror, "dev")
    assert gitops.merge_base(mirror, main, dev) == fork


def test_first_parent_line_leaves_out_merged_side_commits(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    base = upstream.commit({"n.txt": "0"})
    upstream.checkout("-b", "feature")
    side = upstream.commit({"f.txt": "1"})
    upstream.checkout("main")
    mid = upstream.commit({"n.txt": "1"})
    git(upstream.path, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    merge = git(upstream.path, "rev-parse", "HEAD")
    gitops.fetch_branch(mirror, "main")
    assert gitops.first_parent_line(mirror, "main", max_count=100) == [merge, mid, base]
    assert side in gitops.ancestors(mirror, merge, max_count=100)  # an ancestor, but not on the line
    assert gitops.first_parent_line(mirror, "main", max_count=2) == [merge, mid]
    with pytest.raises(GitError, match="invalid branch name"):
        gitops.first_parent_line(mirror, "--all", max_count=5)


def test_first_parent_range_is_the_branch_line_between_two_nights(upstream: LocalRepo, mirror: gitops.Mirror) -> None:
    good = upstream.commit({"a": "1"}, "good")
    upstream.checkout("-b", "side")
    side = upstream.commit({"s": "1"}, "on a side branch")
    upstream.checkout("main")
    c1 = upstream.commit({"a": "2"}, "c1")
    git(upstream.path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = git(upstream.path, "rev-parse", "HEAD")
    bad = upstream.commit({"a": "3"}, "bad")
    gitops.fetch_branch(mirror, "main")
    # the merged side branch's own commit is not on the first-parent line
    assert gitops.first_parent_range(mirror, good, bad, max_commits=10) == [good, c1, merge, bad]
    assert gitops.first_parent_range(mirror, bad, bad, max_commits=10) == [bad]
    assert gitops.commit_author(mirror, bad) == "T <t@example.com>"
    with pytest.raises(GitError, match="more than 2"):
        gitops.first_parent_range(mirror, good, bad, max_commits=2)
    with pytest.raises(GitError, match="not an ancestor"):
        gitops.first_parent_range(mirror, bad, good, max_commits=10)
    with pytest.raises(GitError, match="side branch"):
        gitops.first_parent_range(mirror, side, bad, max_commits=10)
    with pytest.raises(GitError, match="full SHA"):
        gitops.first_parent_range(mirror, "--upload-pack=x", bad, max_commits=10)
