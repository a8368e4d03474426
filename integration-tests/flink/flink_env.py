"""What the PyFlink test jobs share: the table environment they run in and SQL quoting.

Why a module: lookup_join.py and read_avro_changes.py run in the same local mini cluster
set-up (PyFlink's venv from scripts/flink.sh); each script's directory is on its import
path, so they import this file beside them.
"""

from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def identifier(text):
    return "`" + text.replace("`", "``") + "`"


def streaming_table_environment(tmp_dir=None):
    """A streaming TableEnvironment with parallelism 1 (two cores: one task of each
    operator, and no Python workers, as the jobs have no Python UDFs); `tmp_dir` is
    Flink's io.tmp.dirs (Paimon's local lookup files)."""
    config = Configuration()
    config.set_string("parallelism.default", "1")
    if tmp_dir:
        config.set_string("io.tmp.dirs", tmp_dir)
    settings = (
        EnvironmentSettings.new_instance()
        .in_streaming_mode()
        .with_configuration(config)
        .build()
    )
    return TableEnvironment.create(settings)
