"""Secret values are remembered per process and scrubbed from any text: audit lines, job logs, error strings."""

from __future__ import annotations

import json
import logging

from mirrorflow.journal import journal_line
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.secrets import ScrubFilter, scrub, secret_values

KEY = ("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVrnkT2u9kFyI\n"
       "wWLS4BpuAOQvj8jF8lYy5FgpehRANCAASCne8Ms6qqlU8CGwqz80ACIRfJKvHW\n-----END PRIVATE KEY-----\n")


def test_the_secret_values_of_settings_include_each_line_of_a_pem_key_and_a_basic_auth_password():
    values = secret_values({"sasl.password": "hunter2-long", "ssl.key.pem": KEY, "sasl.username": "mirror",
                            "basic.auth.user.info": "reg:reg-pass-123", "ssl.ca.pem": "-----BEGIN CERTIFICATE---"})
    assert "hunter2-long" in values and KEY in values and "reg-pass-123" in values
    assert "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVrnkT2u9kFyI" in values
    assert "mirror" not in values and not any("CERTIFICATE" in v for v in values)


def test_a_client_remembers_its_secrets_and_audit_lines_and_job_logs_lose_them():
    ClusterClient("c9", {"bootstrap.servers": "127.0.0.1:1", "sasl.password": "pw-in-an-error-9",
                         "ssl.key.pem": KEY})
    line = journal_line("copy", error="SASL: login with pw-in-an-error-9 refused", detail="key wWLS4BpuAOQvj8jF8lYy5Fg"
                      "pehRANCAASCne8Ms6qqlU8CGwqz80ACIRfJKvHW")
    assert "pw-in-an-error-9" not in line and "wWLS4Bpu" not in line
    assert json.loads(line)["error"] == "SASL: login with *** refused"
    record = logging.LogRecord("mirrorflow.job", logging.ERROR, __file__, 1, "failed: %s", ("pw-in-an-error-9",), None)
    assert ScrubFilter().filter(record) and record.getMessage() == "failed: ***"
    assert scrub("nothing secret here") == "nothing secret here"
