"""Loads the validate plugin when the suite is started the testinfra way:

    pytest --hosts=ssh://root@10.0.0.11,ssh://root@10.0.0.12 \\
        --rackcert-spec inventories/lab.yaml validation/suite

(`rackcert validate` starts the same suite with `-p validation.suite.plugin`.)
"""

pytest_plugins = ["validation.suite.plugin"]
