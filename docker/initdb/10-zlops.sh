#!/bin/bash
# The zlops store: its own database and role next to Airflow's (run once, by the postgres image).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE zlops LOGIN PASSWORD '${POSTGRES_PASSWORD}';
CREATE DATABASE zlops OWNER zlops;
SQL
