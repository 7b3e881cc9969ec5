"""Study tooling that the command lines (scripts/) and benchmarks (bench/) import.

study_plans (protocols and run plans), runner (train many runs, resumably), study_table and
study_depth and study_regime (summary tables and the plans' readings, over study_stats), figures (the paper's
figure specifications and how to run them), plot (TensorBoard event readers and plots).
Nothing here is run by path; `python -m experiments.study_plans MODEL` prints a protocol's flags.
"""
