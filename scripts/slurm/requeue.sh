# Sourced by the sbatch examples: `requeueable COMMAND...` runs COMMAND so that a task SLURM stops
# early writes its checkpoint, and comes back by itself to resume from it.
#
# - Preemption: SLURM sends SIGTERM to every process of the task. main.py finishes its step and
#   writes a checkpoint (scripts/study.py and figures.py wait for it); this shell waits for the
#   command to end. SLURM itself queues the task again (`#SBATCH --requeue` on a cluster whose
#   PreemptMode is REQUEUE); a task cancelled with scancel (also SIGTERM) is not brought back.
# - The time limit: with `#SBATCH --signal=B:USR1@120` SLURM sends SIGUSR1 to this shell alone,
#   two minutes before. The shell passes SIGTERM on to the command, waits for its checkpoint and
#   asks SLURM to queue the task again (`scontrol requeue $SLURM_JOB_ID`).
# On its next start the task runs the same command: scripts/study.py and scripts/figures.py
# resume an interrupted run from its checkpoint.

_requeue_stop() {  # $1: the signal that arrived
  trap '' TERM USR1
  _requeue_signal=$1
  _requeue_trapped=1
  if [ "$1" = USR1 ] && [ -n "${_requeue_child:-}" ]; then  # only this shell was told
    kill -TERM "$_requeue_child" 2>/dev/null || true
  fi
  echo "requeue: $1 received; waiting for the run to write its checkpoint" >&2
}

requeueable() {
  _requeue_signal=""
  _requeue_child=""
  trap '_requeue_stop TERM' TERM
  trap '_requeue_stop USR1' USR1
  "$@" &
  _requeue_child=$!
  if [ -n "$_requeue_signal" ]; then  # a signal before the command started: pass it on now
    kill -TERM "$_requeue_child" 2>/dev/null || true
  fi
  local code=0
  while true; do  # a signal makes `wait` return early: wait again for the command's own status
    _requeue_trapped=""
    code=0
    wait "$_requeue_child" || code=$?
    [ -n "$_requeue_trapped" ] || break
  done
  if [ "$_requeue_signal" = USR1 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "requeue: asking SLURM to queue job ${SLURM_JOB_ID} again" >&2
    scontrol requeue "${SLURM_JOB_ID}" || echo "requeue: scontrol refused to requeue job ${SLURM_JOB_ID}" >&2
  fi
  return "$code"
}
