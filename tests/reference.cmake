# Python reference and CLI tests; see tests/reference/ and tests/cli/.
