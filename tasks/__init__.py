"""Stage functions of the pipeline, one module per stage.

Each module holds a plain function that reads its inputs from files, calls the library
(``veilbench``), writes its outputs atomically and logs the run to MLflow, plus a thin Prefect
task wrapping it (``*_task``). Unit tests call the plain functions; flows compose the tasks.
"""

from tasks.numerics import pin_cpu_code_paths
from tasks.telemetry import telemetry_off

pin_cpu_code_paths()  # before numpy or torch load: one CPU code path, the same bits on every x86-64 CPU
telemetry_off()  # before MLflow, Prefect or DVC load: no usage reports from any entry point
