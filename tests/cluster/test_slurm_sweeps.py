"""Sweeps through the SLURM launcher against the local cluster: a 4-trial grid and an Optuna study name their best
run like local sweeps, waiting is quiet, a failed job is named with its log, identification sweeps run as job
arrays, and the local_slurm.sh script stops exactly what it started."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cluster.local_cluster import SCRIPT, Cluster, cluster_folder, start_cluster, stop_cluster

SMALL = ["data.sim.n_poses=400", "trainer.max_epochs=2", "data.batch_size=64", "logger=none"]
SLURM = ["hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]
LIMIT_EPOCHS = 500  # the time-limit test's training: ~100 s at 0.2 s/epoch, longer than one try runs before its signal


def run_train(cluster: Cluster, root: Path, cache_dir: Path, args: list[str], timeout: int = 600):
    env = dict(cluster.env, FLEXLEARN_ROOT=str(root), WANDB_MODE="offline", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", *args, f"paths.cache_dir={cache_dir}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep_dir(root: Path, task: str = "train") -> Path:
    (found,) = root.glob(f"logs/{task}/multiruns/*")
    return found


def best_lines(stdout: str) -> dict[str, str]:
    """The best-run block printed at the end of a sweep: {'best run': ..., 'directory': ..., 'checkpoint': ...}."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^(best run|  directory|  checkpoint|  summary):\s+(.*)$", line)
        if m:
            out[m[1].strip()] = m[2]
    return out


def assert_quiet(output: str, n_jobs: int) -> None:
    """No accounting warnings; one status line per change of the job counts, never the same line twice."""
    assert "Bypassing" not in output and "accounting storage is disabled" not in output
    status = [ln.split("] ", 1)[-1] for ln in output.splitlines() if "slurm array" in ln and " jobs: " in ln]
    assert status and all(a != b for a, b in zip(status, status[1:])), status
    assert len(status) <= 2 * n_jobs + 2, status


@pytest.mark.slow  # run by CI with the cluster's other slow tests (.ci/run)
def test_four_trial_grid_sweep_names_its_best_run(slurm_cluster, tmp_path, cache_dir):
    proc = run_train(
        slurm_cluster, tmp_path, cache_dir, ["-m", *SLURM, *SMALL, "task.lr=1e-3,3e-3", "model.activation=silu,tanh"]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = sweep_dir(tmp_path)
    metrics = {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/metrics.json")}
    assert sorted(metrics) == ["0", "1", "2", "3"]
    assert all(m["status"] == "ok" for m in metrics.values())
    # the best run is the job whose best checkpoint scored lowest, with that checkpoint
    best = min(metrics, key=lambda k: metrics[k]["best_score"])
    shown = best_lines(proc.stdout)
    assert shown["best run"].startswith(f"job {best} (task.lr=")
    assert f"val/ang_err_median_deg = {metrics[best]['best_score']:.6g}" in shown["best run"]
    assert shown["directory"] == str(root / best) and shown["checkpoint"] == metrics[best]["best_ckpt"]
    assert Path(shown["checkpoint"]).is_file()
    rows = list(csv.DictReader(open(root / "summary.csv")))
    assert [r["job"] for r in rows] == ["0", "1", "2", "3"] and all(r["status"] == "ok" for r in rows)
    assert f"| **{best} (best)** | ok |" in (root / "summary.md").read_text()
    assert_quiet(proc.stdout + proc.stderr, 4)
    # every job ran as a task of one SLURM array
    assert len({p.name.split("_")[0] for p in (root / ".submitit").glob("[0-9]*_*")}) == 1


@pytest.mark.slow  # run by CI with the cluster's other slow tests (.ci/run)
def test_failed_job_is_named_with_its_log_and_exit_2(slurm_cluster, tmp_path, cache_dir):
    proc = run_train(slurm_cluster, tmp_path, cache_dir, ["-m", *SLURM, *SMALL, "task.lr=-1"])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    m = re.search(r"1 of 1 jobs failed: job #0 \(.*task\.lr=-1.*\) failed: SLURM job (\S+) ended FAILED", last)
    assert m, last
    log = re.search(r"; log: (\S+_log\.err); last line: (.*)$", last)
    assert log and Path(log[1]).is_file() and m[1] in log[1], last
    assert "task.lr" in log[2] and "-1" in log[2]  # the job's own one-line error, from its SLURM log
    assert "no best run: no finished job has a finite val/ang_err_median_deg" in proc.stdout


@pytest.mark.slow  # run by CI with the cluster's other slow tests (.ci/run)
def test_identification_sweep_runs_as_a_job_array_and_aggregates(slurm_cluster, tmp_path, cache_dir):
    proc = run_train(
        slurm_cluster,
        tmp_path,
        cache_dir,
        [
            "-m",
            *SLURM,
            "experiment=identify_modal_sim",
            "logger=none",
            "task.problem.duration=1.0",
            "task.problem.seed=0,1",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = sweep_dir(tmp_path, "identify_modal")
    scripts = sorted(root.glob(".submitit/*/*_submission.sh"))  # one per array, in each task's folder
    assert scripts, sorted(p.name for p in root.glob(".submitit/*/*"))
    text = scripts[0].read_text()
    assert "#SBATCH --array=0-1%" in text and "#SBATCH --cpus-per-task=1" in text, text[:2000]
    for p in root.glob("*/metrics.json"):
        m = json.loads(p.read_text())
        assert m["id/EI_rel_err"] < 0.05 and m["id/converged"] == 1.0
    rows = list(csv.DictReader(open(root / "summary.csv")))
    assert [r["task.problem.seed"] for r in rows] == ["0", "1"] and all(r["status"] == "ok" for r in rows)
    assert best_lines(proc.stdout)["best run"].startswith("job ")


@pytest.mark.slow
def test_optuna_study_over_slurm_names_its_best_trial(slurm_cluster, tmp_path, cache_dir):
    proc = run_train(
        slurm_cluster,
        tmp_path,
        cache_dir,
        [
            *SLURM,
            *SMALL,
            "hparams_search=direction_optuna",
            "hydra.sweeper.n_trials=4",
            "hydra.sweeper.n_jobs=2",
            "hydra.sweeper.sampler.n_startup_trials=4",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = sweep_dir(tmp_path)
    study = yaml.safe_load((root / "optimization_results.yaml").read_text())
    metrics = {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/metrics.json")}
    assert len(metrics) == 4
    best = min(metrics, key=lambda k: metrics[k]["best_score"])
    # the study's best value is the best job's best checkpoint score, and that job is the one printed
    assert study["best_value"] == pytest.approx(metrics[best]["best_score"], rel=1e-9)
    assert best_lines(proc.stdout)["best run"].startswith(f"job {best} (")
    assert_quiet(proc.stdout + proc.stderr, 4)


def test_local_slurm_script_stops_exactly_what_it_started(tmp_path):
    """``start`` then ``stop`` on a second cluster: its daemons and job steps are gone, nothing else was touched."""
    folder = cluster_folder()
    try:
        cluster = start_cluster(folder)
        pids = {
            n: int((folder / f).read_text())
            for n, f in [("munged", "munge/munged.pid"), ("slurmctld", "slurmctld.pid"), ("slurmd", "slurmd.pid")]
        }
        assert all(Path(f"/proc/{p}").exists() for p in pids.values())
        job = subprocess.run(
            ["sbatch", "--wrap", "sleep 300", "-o", "/dev/null"],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert job.returncode == 0, job.stderr
        again = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], capture_output=True, text=True, timeout=60)
        assert again.returncode == 3 and "already runs" in again.stderr  # never two clusters on one folder
        bad = subprocess.run(["bash", str(SCRIPT), "restart"], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and "usage" in bad.stderr
    finally:
        stop_cluster(folder)
    assert not any(Path(f"/proc/{p}").exists() and str(folder) in _cmdline(p) for p in pids.values())
    left = [p for p in os.listdir("/proc") if p.isdigit() and str(folder) in _cmdline(int(p))]
    assert not left, [(p, _cmdline(int(p))) for p in left]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["signal", "requeue"])
def test_stopped_job_resumes_to_the_same_final_metrics(slurm_cluster, tmp_path, cache_dir, stop):
    """Two identical jobs; once job 0 has written last.ckpt it gets SLURM's warning signal (``signal``: USR2, what
    ``--signal`` sends before the time limit and what submitit's own tests send) or is requeued by the scheduler
    (``requeue``: ``scontrol requeue``, as a preemption with PreemptMode=REQUEUE: SIGTERM, then a restart). It
    resumes from last.ckpt in the same directory and ends with the metrics of job 1, which ran through."""
    import time

    args = ["-m", *SLURM, "data.sim.n_poses=400", "data.batch_size=64", "logger=csv", "trainer.max_epochs=30"]
    env = dict(slurm_cluster.env, FLEXLEARN_ROOT=str(tmp_path), WANDB_MODE="offline", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flexlearn.apps.train", *args, "seed=7,7", f"paths.cache_dir={cache_dir}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        last = None
        while time.monotonic() < deadline and proc.poll() is None:
            last = next(tmp_path.glob("checkpoints/train/multiruns/*/0/last.ckpt"), None)
            if last is not None:
                break
            time.sleep(0.2)
        assert last is not None, "job 0 wrote no last.ckpt"
        (array,) = {p.name.split("_")[0] for p in tmp_path.glob("logs/train/multiruns/*/.submitit/[0-9]*_*")}
        command = ["scancel", "--signal=USR2"] if stop == "signal" else ["scontrol", "requeue"]
        sig = subprocess.run([*command, f"{array}_0"], env=slurm_cluster.env, capture_output=True)
        assert sig.returncode == 0, sig.stderr
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    root = sweep_dir(tmp_path)
    log0 = "".join(p.read_text() for p in root.glob(f".submitit/{array}_0/*_log.*"))
    if stop == "signal":
        assert "this job is preempted" in log0 or "this job is timed-out" in log0, log0[-3000:]
    assert f"resumes from {last}" in log0, log0[-3000:]
    show = subprocess.run(
        ["scontrol", "show", "job", f"{array}_0"], env=slurm_cluster.env, capture_output=True, text=True
    )
    assert "Restarts=1" in show.stdout, show.stdout
    m0, m1 = (json.loads((root / j / "metrics.json").read_text()) for j in ("0", "1"))
    assert m0["epochs"] == m1["epochs"] == 30
    for key in ("best_score", "test/ang_err_median_deg", "test/ang_err_rms_deg", "val/loss"):
        assert m0[key] == pytest.approx(m1[key], rel=1e-6, abs=1e-9), key
    assert Path(m0["best_ckpt"]).parent == last.parent  # the resumed run kept writing into its own checkpoints
    # one continuous run: the CSV log has every epoch once
    epochs = [
        int(float(r["epoch"])) for r in csv.DictReader(open(root / "0" / "csv" / "metrics.csv")) if r.get("val/loss")
    ]
    assert epochs == list(range(30)), epochs


@pytest.mark.slow
def test_two_rank_ddp_under_srun_learns_what_one_process_does(slurm_cluster, tmp_path, cache_dir):
    """Three seeds each of one process (batch 64) and of two DDP ranks under srun (32 per rank: the same global
    batch): the ranks see disjoint halves of the training data, one metrics.json and one set of checkpoints is
    written, and the final test error agrees with one process's within the seeds' noise."""
    import statistics

    record = [
        "+callbacks.rank_batches._target_=tests.cluster.rank_batches.RecordBatches",
        "+callbacks.rank_batches.out=${paths.output_dir}/batches",
    ]
    common = [*SLURM, "data.sim.n_poses=1000", "trainer.max_epochs=6", "logger=none", "seed=1,2,3", *record]
    runs = {
        "one": [*common, "data.batch_size=64"],
        "two": [
            *common,
            "data.batch_size=32",
            "trainer=ddp_cpu",
            "trainer.devices=2",
            "hydra.launcher.tasks_per_node=2",
        ],
    }
    procs = {}
    for name, args in runs.items():
        root = tmp_path / name
        root.mkdir()
        env = dict(slurm_cluster.env, FLEXLEARN_ROOT=str(root), WANDB_MODE="offline", OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
        cmd = [sys.executable, "-m", "flexlearn.apps.train", "-m", *args, f"paths.cache_dir={cache_dir}"]
        procs[name] = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    outs = {name: p.communicate(timeout=900)[0] for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, outs[name][-3000:]
    err, seen = {}, {}
    for name in runs:
        root = sweep_dir(tmp_path / name)
        metrics = [json.loads((root / j / "metrics.json").read_text()) for j in ("0", "1", "2")]
        assert [m["world_size"] for m in metrics] == [1 if name == "one" else 2] * 3
        err[name] = [m["test/ang_err_median_deg"] for m in metrics]
        for j in ("0", "1", "2"):
            ckpts = sorted(p.name for p in (tmp_path / name).glob(f"checkpoints/train/multiruns/*/{j}/*.ckpt"))
            assert len(ckpts) == 2 and "last.ckpt" in ckpts, ckpts  # best and last, written once
            for p in (root / j / "batches").glob("rank*.json"):
                seen[name, j, p.stem] = {tuple(v) for v in json.loads(p.read_text())}
        (array,) = {p.name.split("_")[0] for p in root.glob(".submitit/[0-9]*_*")}
        logs = sorted(p.name for p in root.glob(f".submitit/{array}_0/*_log.out"))
        assert len(logs) == (1 if name == "one" else 2), logs  # one srun task per rank
    for j in ("0", "1", "2"):
        rank0, rank1 = seen["two", j, "rank0"], seen["two", j, "rank1"]
        assert len(rank0 & rank1) <= 1  # disjoint halves (one sample may pad an odd count)
        assert rank0 | rank1 == seen["one", j, "rank0"]  # together: what one process sees in the epoch
    n = len(err["one"])
    noise = (statistics.variance(err["one"]) / n + statistics.variance(err["two"]) / n) ** 0.5
    gap = abs(statistics.fmean(err["one"]) - statistics.fmean(err["two"]))
    assert gap <= 3 * noise, (err, gap, noise)
    print(json.dumps({"test/ang_err_median_deg": err, "gap_deg": gap, "noise_deg": noise}))


def test_a_setting_the_cluster_refuses_is_one_line_naming_it(slurm_cluster, tmp_path, cache_dir):
    proc = run_train(slurm_cluster, tmp_path, cache_dir, ["-m", *SLURM, *SMALL, "hydra.launcher.partition=nosuch"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("flexlearn-train: error: config 'hydra.launcher.partition' = 'nosuch': sbatch refused")


@pytest.mark.slow
def test_a_job_at_its_real_time_limit_resumes_to_the_same_final_metrics(slurm_cluster, tmp_path, cache_dir):
    """No signal sent by hand: the job asks for two minutes (``--time=2``) and for USR2 60 s before the limit
    (``--signal=USR2@60``), and its training needs longer than SLURM lets it run before that. slurmctld signals it
    on its own, submitit sees a time-out, the job checkpoints, is requeued and resumes from last.ckpt (as often
    as it takes, at most ``max_num_timeout`` times). slurmctld looks every 30 s and may signal up to 30 s early, so
    a try trains for 20-50 s after start-up; the training (every epoch, no plateau stop) needs ~100 s on a fast
    machine. It ends with exactly the metrics of the same training run
    locally without a limit (run beside it)."""
    train = [
        "data.sim.n_poses=3000",
        "data.batch_size=32",
        "logger=csv",
        f"trainer.max_epochs={LIMIT_EPOCHS}",
        "callbacks.schedule.target_steps=1000000",  # every one of the LIMIT_EPOCHS epochs, no plateau stop
        "callbacks.schedule.min_patience=1000000",
        "seed=7",
    ]
    limit = ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=60", "hydra.launcher.max_num_timeout=12"]
    slurm_root, local_root = tmp_path / "slurm", tmp_path / "local"
    slurm_root.mkdir()
    local_root.mkdir()
    env = dict(slurm_cluster.env, FLEXLEARN_ROOT=str(local_root), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "flexlearn.apps.train", *train, f"paths.cache_dir={cache_dir}"]
    local = subprocess.Popen(
        command, cwd=local_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        res = run_train(slurm_cluster, slurm_root, cache_dir, ["-m", *SLURM, *limit, *train], timeout=2400)
        _, local_err = local.communicate(timeout=1200)
    finally:
        if local.poll() is None:
            local.kill()
            local.wait()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert local.returncode == 0, local_err[-3000:]
    root = sweep_dir(slurm_root)
    logs = "".join(p.read_text() for p in root.glob(".submitit/*/*_log.*"))
    assert "timed-out" in logs and "resumes from" in logs, logs[-3000:]  # submitit's verdict on SLURM's own signal
    (job,) = {p.name for p in root.glob(".submitit/[0-9]*") if p.is_dir()}  # one job, no array: .submitit/<job id>
    show = subprocess.run(["scontrol", "show", "job", job], env=slurm_cluster.env, capture_output=True, text=True)
    found = re.search(r"Restarts=(\d+)", show.stdout)
    assert found and int(found[1]) >= 1, show.stdout
    (local_run,) = local_root.glob("logs/train/runs/*")
    m_slurm = json.loads((root / "0" / "metrics.json").read_text())
    m_local = json.loads((local_run / "metrics.json").read_text())
    assert m_slurm["epochs"] == m_local["epochs"] == LIMIT_EPOCHS
    for key in ("best_score", "test/ang_err_median_deg", "test/ang_err_rms_deg", "val/loss"):
        assert m_slurm[key] == pytest.approx(m_local[key], rel=1e-6, abs=1e-9), key
    epochs = [
        int(float(r["epoch"])) for r in csv.DictReader(open(root / "0" / "csv" / "metrics.csv")) if r.get("val/loss")
    ]
    assert epochs == list(range(LIMIT_EPOCHS)), epochs
