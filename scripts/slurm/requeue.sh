# Sourced by the sbatch examples: `requeueable COMMAND...` runs COMMAND so that a task SLURM stops
# early comes back by itself and resumes from its checkpoints.
#
# - Preemption (and a time limit reached): SLURM sends SIGTERM to every process of the task.
#   main.py finishes its step and writes a checkpoint; this shell waits for that, then asks for
#   the task to be queued again (`scontrol requeue`; with PreemptMode=REQUEUE SLURM does it
#   itself and the request is a no-op).
# - `#SBATCH --signal=B:USR1@120`: two minutes before the time limit SLURM sends SIGUSR1 to this
#   shell only; it passes SIGTERM on to the command and its children once, then does the same.
# Needs `#SBATCH --requeue`. On its next start the task runs the same command: scripts/study.py and
# scripts/figures.py resume an interrupted run from its checkpoint.

_requeue_descendants() {  # every process below $1
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do
    echo "$child"
    _requeue_descendants "$child"
  done
}

_requeue_stop() {  # $1: the signal that arrived
  trap '' TERM USR1
  _requeue_signal=$1
  local pids
  pids="$_requeue_child $(_requeue_descendants "$_requeue_child")"
  if [ "$1" = USR1 ]; then  # only this shell was told: tell the command's processes
    kill -TERM $pids 2>/dev/null || true
  fi
  echo "requeue: $1 received; waiting for the run to write its checkpoint" >&2
  local pid
  for pid in $pids; do
    while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
  done
}

requeueable() {
  _requeue_signal=""
  "$@" &
  _requeue_child=$!
  trap '_requeue_stop TERM' TERM
  trap '_requeue_stop USR1' USR1
  local code=0
  wait "$_requeue_child" || code=$?
  while [ -z "$_requeue_signal" ] && kill -0 "$_requeue_child" 2>/dev/null; do  # woken by another signal
    wait "$_requeue_child" || code=$?
  done
  if [ -n "$_requeue_signal" ]; then
    code=0
    wait "$_requeue_child" 2>/dev/null || code=$?
    if [ -n "${SLURM_JOB_ID:-}" ]; then
      echo "requeue: asking SLURM to queue job ${SLURM_JOB_ID} again" >&2
      scontrol requeue "${SLURM_JOB_ID}" || echo "requeue: scontrol refused (SLURM may be requeueing it already)" >&2
    fi
  fi
  return "$code"
}
