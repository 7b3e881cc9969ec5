"""Study tooling that the command lines (scripts/) and benchmarks (bench/) import.

study_plans (protocols and run plans), runner (train many runs, resumably), sharding (a plan's
runs split over machines, and the merged results checked), ray_executor and ray_node (runs sent
to the devices of a Ray cluster), study_table and
study_depth and study_regime (summary tables and the plans' readings, over study_stats), figures (the paper's
figure specifications and how to run them), plot (TensorBoard event readers and plots).
Nothing here is run by path; `python -m experiments.study_plans MODEL` prints a protocol's flags.
"""
