# Command-line behaviour of the real `berth` binary (SPEC 2). Included from tests/CMakeLists.txt.
#
# Each failure case is two tests: `.exit` requires a non-zero exit status (WILL_FAIL) and
# `.message` requires the clear message (PASS_REGULAR_EXPRESSION, which ignores the status) and
# forbids a crash, a started server, and (for ONE_LINE cases) more than one line of output.
# Serve cases pass --listen 127.0.0.1:0 so that a regression that starts serving neither takes
# a fixed port nor hangs the run (TIMEOUT).

set(BERTH_CLI_DATA ${CMAKE_CURRENT_LIST_DIR}/cli)

# Output that must never appear when berth refuses to start.
set(BERTH_CLI_NEVER "listening on|terminate called|Aborted|Segmentation|Traceback|stack trace")

# berth_cli_fails(NAME REGEX [ONE_LINE] ARGS ...)
function(berth_cli_fails name regex)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "ONE_LINE" "" "ARGS")
  set(never "${BERTH_CLI_NEVER}")
  if(ARG_ONE_LINE)
    # Two non-empty lines: a character, a newline, a character.
    string(APPEND never "|[^\n]\n+[^\n]")
  endif()
  add_test(NAME cli.${name}.exit COMMAND berth ${ARG_ARGS})
  set_tests_properties(cli.${name}.exit PROPERTIES WILL_FAIL TRUE TIMEOUT 10 LABELS cli)
  add_test(NAME cli.${name}.message COMMAND berth ${ARG_ARGS})
  set_tests_properties(cli.${name}.message PROPERTIES
    PASS_REGULAR_EXPRESSION "${regex}"
    FAIL_REGULAR_EXPRESSION "${never}"
    TIMEOUT 10 LABELS cli)
endfunction()

# ---- commands ------------------------------------------------------------------------------------

add_test(NAME cli.version COMMAND berth version)
set_tests_properties(cli.version PROPERTIES
  PASS_REGULAR_EXPRESSION "^berth ${PROJECT_VERSION} \\(commit [^,]+, [A-Za-z]+\\)\n$"
  TIMEOUT 10 LABELS cli)
add_test(NAME cli.version.exit COMMAND berth version)
set_tests_properties(cli.version.exit PROPERTIES TIMEOUT 10 LABELS cli)

add_test(NAME cli.version.commit
  COMMAND ${CMAKE_COMMAND} -DBERTH=$<TARGET_FILE:berth> -DSRC=${PROJECT_SOURCE_DIR}
          -P ${BERTH_CLI_DATA}/version_commit_test.cmake)
set_tests_properties(cli.version.commit PROPERTIES TIMEOUT 10 LABELS cli)

add_test(NAME cli.version-flag COMMAND berth --version)
set_tests_properties(cli.version-flag PROPERTIES
  PASS_REGULAR_EXPRESSION "^berth ${PROJECT_VERSION} " TIMEOUT 10 LABELS cli)

berth_cli_fails(no-command "^berth: no command given \\(expected serve, simulate, replay or version\\)\n")
berth_cli_fails(unknown-command "^berth: unknown command \"bogus\" \\(expected serve, simulate, replay or version\\)\n$"
  ONE_LINE ARGS bogus)
berth_cli_fails(extra-argument "unexpected argument \"extra\" after version" ONE_LINE
  ARGS version extra)

# ---- serve: flags ----------------------------------------------------------------------------------

berth_cli_fails(serve.unknown-flag "bogus-flag" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --bogus-flag)
berth_cli_fails(serve.listen-nonsense
  "^berth: --listen: expected HOST:PORT such as 127\\.0\\.0\\.1:8888, got \"nonsense\"\n$" ONE_LINE
  ARGS serve --listen nonsense)
berth_cli_fails(serve.listen-port-range "^berth: --listen: .*got \"127\\.0\\.0\\.1:99999\"\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:99999)
berth_cli_fails(serve.log-format "^berth: --log-format: expected text or json, got \"xml\"\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --log-format xml)
berth_cli_fails(serve.log-format-equals "^berth: --log-format: expected text or json, got \"xml\"\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --log-format=xml)
berth_cli_fails(serve.log-level "^berth: --log-level: expected trace, debug, info, warn, error or off, got \"loud\"\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --log-level loud)
berth_cli_fails(serve.kubeconfig-and-cluster "--cluster cannot be combined with --kubeconfig" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --cluster ${BERTH_CLI_DATA}/cluster-bad-quantity.json
       --kubeconfig /nonexistent/kubeconfig)
berth_cli_fails(serve.kubeconfig-and-in-cluster "--kubeconfig and --in-cluster exclude each other" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --in-cluster --kubeconfig /nonexistent/kubeconfig)
berth_cli_fails(serve.context-without-kubeconfig "^berth: --context needs --kubeconfig\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --context prod)
berth_cli_fails(serve.tls-cert-without-key
  "^berth: --tls-cert-file and --tls-key-file go together \\(HTTPS needs both\\)\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --tls-cert-file ${BERTH_CLI_DATA}/tls-missing.crt)
berth_cli_fails(serve.tls-client-ca-alone
  "^berth: --tls-client-ca-file needs --tls-cert-file and --tls-key-file\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --tls-client-ca-file ${BERTH_CLI_DATA}/tls-missing.crt)
berth_cli_fails(serve.tls-missing-file
  "^berth: HTTPS: cannot read certificate file \".*/tls-missing\\.crt\": No such file or directory\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --tls-cert-file ${BERTH_CLI_DATA}/tls-missing.crt
       --tls-key-file ${BERTH_CLI_DATA}/tls-missing.key)
berth_cli_fails(serve.tls-not-a-certificate
  "^berth: HTTPS: key file \".*/config-unknown-field\\.json\" holds no usable unencrypted PEM private key" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --tls-cert-file ${BERTH_CLI_DATA}/config-unknown-field.json
       --tls-key-file ${BERTH_CLI_DATA}/config-unknown-field.json)
berth_cli_fails(serve.ops-listen "^berth: --ops-listen: expected HOST:PORT such as 0.0.0.0:8889, got \"8889\"\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --ops-listen 8889)
berth_cli_fails(serve.kubeconfig-missing "^berth: [^\n]*/nonexistent/kubeconfig[^\n]*\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --kubeconfig /nonexistent/kubeconfig)
# Outside a pod, --in-cluster names what is missing.
add_test(NAME cli.serve.in-cluster-outside-pod.message
  COMMAND ${CMAKE_COMMAND} -E env --unset=KUBERNETES_SERVICE_HOST --unset=KUBERNETES_SERVICE_PORT
          $<TARGET_FILE:berth> serve --listen 127.0.0.1:0 --in-cluster)
set_tests_properties(cli.serve.in-cluster-outside-pod.message PROPERTIES
  PASS_REGULAR_EXPRESSION "^berth: [^\n]*KUBERNETES_SERVICE_HOST[^\n]*\n$"
  FAIL_REGULAR_EXPRESSION "${BERTH_CLI_NEVER}" TIMEOUT 10 LABELS cli)
# In a pod (KUBERNETES_SERVICE_HOST set), `berth serve` with no flags is Kubernetes mode with the
# service account; here the account's token is absent, which the one line names.
add_test(NAME cli.serve.in-pod-defaults-to-kubernetes.message
  COMMAND ${CMAKE_COMMAND} -E env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=6443
          $<TARGET_FILE:berth> serve --listen 127.0.0.1:0)
set_tests_properties(cli.serve.in-pod-defaults-to-kubernetes.message PROPERTIES
  PASS_REGULAR_EXPRESSION "^berth: in-cluster service account [^\n]*/var/run/secrets/kubernetes\\.io/serviceaccount/token[^\n]*\n$"
  FAIL_REGULAR_EXPRESSION "${BERTH_CLI_NEVER}" TIMEOUT 10 LABELS cli)
# ... while --cluster in a pod keeps standalone mode (a snapshot replay).
add_test(NAME cli.serve.in-pod-cluster-file-stays-standalone
  COMMAND ${CMAKE_COMMAND} -E env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=6443
          $<TARGET_FILE:berth> serve --listen 127.0.0.1:0 --cluster ${BERTH_CLI_DATA}/cluster-bad-quantity.json)
set_tests_properties(cli.serve.in-pod-cluster-file-stays-standalone PROPERTIES
  PASS_REGULAR_EXPRESSION "cluster-bad-quantity\\.json: items\\[1\\]"
  TIMEOUT 10 LABELS cli)
berth_cli_fails(serve.config-bad-lease
  "^berth: [^\n]*/config-bad-lease\.json: kubernetes\.leaderElection: [^\n]*renewDeadlineSeconds must be less than leaseDurationSeconds[^\n]*\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --config ${BERTH_CLI_DATA}/config-bad-lease.json)

# ---- serve: files --------------------------------------------------------------------------------

berth_cli_fails(serve.cluster-missing "^berth: /nonexistent/cluster\\.json: cannot open: No such file or directory\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --cluster /nonexistent/cluster.json)
berth_cli_fails(serve.cluster-invalid-json
  "^berth: [^\n]*/cluster-invalid-json\\.json: invalid JSON at line 5, column [0-9]+: [^\n]+\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --cluster ${BERTH_CLI_DATA}/cluster-invalid-json.json)
berth_cli_fails(serve.cluster-bad-quantity
  "^berth: [^\n]*/cluster-bad-quantity\\.json: items\\[1\\]\\.status\\.allocatable\\.memory: invalid quantity \"32 gigs\"[^\n]*\n$"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --cluster ${BERTH_CLI_DATA}/cluster-bad-quantity.json)
berth_cli_fails(serve.config-missing "^berth: /nonexistent/berth\\.json: cannot open: [^\n]+\n$" ONE_LINE
  ARGS serve --listen 127.0.0.1:0 --config /nonexistent/berth.json)
berth_cli_fails(serve.config-unknown-field
  "^berth: [^\n]*/config-unknown-field\\.json: maxRequestByte: unknown field \\(known: [^\n]*maxRequestBytes"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --config ${BERTH_CLI_DATA}/config-unknown-field.json)
berth_cli_fails(serve.config-invalid-json "^berth: [^\n]*/cluster-invalid-json\\.json: invalid JSON at line 5, column"
  ONE_LINE ARGS serve --listen 127.0.0.1:0 --config ${BERTH_CLI_DATA}/cluster-invalid-json.json)

# ---- serve: --help lists every flag with its default (absl spells them with underscores) ---------

add_test(NAME cli.serve.help COMMAND berth serve --help)
set_tests_properties(cli.serve.help PROPERTIES
  PASS_REGULAR_EXPRESSION
    "--cluster .*default: \"\";.*--config .*default: \"\";.*--in_cluster .*default: false;.*--kubeconfig .*default: \"\";.*--listen .*default: \"127\\.0\\.0\\.1:8888\";.*--log_format .*default: \"text\";.*--log_level .*default: \"info\";.*--scheduler_name .*default: \"\";"
  FAIL_REGULAR_EXPRESSION "No flags matched"
  TIMEOUT 10 LABELS cli)

# ---- serve: the happy path, SIGTERM, and the snapshot round trip (bash, curl) ----------------------

add_test(NAME cli.serve.round-trip COMMAND bash ${BERTH_CLI_DATA}/serve_test.sh $<TARGET_FILE:berth>)
set_tests_properties(cli.serve.round-trip PROPERTIES
  FAIL_REGULAR_EXPRESSION "FAIL: "
  SKIP_RETURN_CODE 77
  TIMEOUT 60 LABELS cli)

# The CLI tests describe berth outside a pod: where the suite itself runs in a pod, the service
# variables would switch `berth serve` to Kubernetes mode. (The in-pod tests set them again.)
get_property(berth_cli_all_tests DIRECTORY PROPERTY TESTS)
foreach(t IN LISTS berth_cli_all_tests)
  if(t MATCHES "^cli\\.")
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT_MODIFICATION
      "KUBERNETES_SERVICE_HOST=unset:" "KUBERNETES_SERVICE_PORT=unset:")
  endif()
endforeach()

# ---- simulate ----------------------------------------------------------------------------------

berth_cli_fails(simulate.no-cluster "^berth: simulate needs --cluster FILE" ONE_LINE
  ARGS simulate --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml)
berth_cli_fails(simulate.no-workload "^berth: simulate needs --workload FILE" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json)
berth_cli_fails(simulate.bad-workload
  "^berth: .*workload-bad-quantity.yaml: jobs\\[1\\] \\(train-2\\): pods\\[0\\]\\.requests\\.cpu: .*lots" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${BERTH_CLI_DATA}/workload-bad-quantity.yaml --out ${CMAKE_CURRENT_BINARY_DIR}/sim-bad)
# An output directory that cannot be made is refused before the simulation runs, not after it.
berth_cli_fails(simulate.out-not-a-directory
  "^berth: cannot create .*workload-bad-quantity\\.yaml/report: Not a directory\n$" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml
       --out ${BERTH_CLI_DATA}/workload-bad-quantity.yaml/report)
berth_cli_fails(simulate.unknown-profile "^berth: .*unknown profile \"bogus\".*gpu-mix" ONE_LINE
  ARGS simulate --generate bogus --jobs 10 --out ${CMAKE_CURRENT_BINARY_DIR}/bogus.yaml)
berth_cli_fails(simulate.break-rule "^berth: --break-rule: unknown rule \"nonsense\"" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml --break-rule nonsense)

berth_cli_fails(simulate.eta-noise-alone "^berth: --eta-noise needs --eta-every-seconds" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml --eta-noise 0.3)
berth_cli_fails(simulate.eta-noise-range "^berth: --eta-noise: expected 0 or more, below 1" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml --eta-every-seconds 60 --eta-noise 1.5)
berth_cli_fails(simulate.eta-knows-arrivals-alone "^berth: --eta-knows-arrivals needs --eta-every-seconds" ONE_LINE
  ARGS simulate --cluster ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.cluster.json
       --workload ${PROJECT_SOURCE_DIR}/bench/workloads/seed-stories.yaml --eta-knows-arrivals)
# The ETA accuracy study on a shipped workload: the table, and the goal with exact durations (a
# median error of at most a tenth of the mean wait) as report.json gives it.
add_test(NAME cli.simulate.eta-study COMMAND ${CMAKE_COMMAND}
  -DBERTH=$<TARGET_FILE:berth> -DSOURCE=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sim-eta
  -P ${CMAKE_CURRENT_LIST_DIR}/cli/simulate_eta_test.cmake)
set_tests_properties(cli.simulate.eta-study PROPERTIES TIMEOUT 300 LABELS cli)

# A shipped workload, end to end: the summary table, report.json, the plots and index.html.
add_test(NAME cli.simulate.shipped COMMAND ${CMAKE_COMMAND}
  -DBERTH=$<TARGET_FILE:berth> -DSOURCE=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sim-shipped
  -P ${CMAKE_CURRENT_LIST_DIR}/cli/simulate_test.cmake)
set_tests_properties(cli.simulate.shipped PROPERTIES TIMEOUT 300 LABELS cli)

# ---- docs: commands and counts that work as written --------------------------------------------

add_test(NAME cli.docs.as-written COMMAND bash ${BERTH_CLI_DATA}/docs_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.docs.as-written PROPERTIES FAIL_REGULAR_EXPRESSION "FAIL: " TIMEOUT 30 LABELS cli)

# berth replay (docs/decisions.md, "Journal and replay"): the journal shipped in bench/journals,
# recorded by `berth simulate --journal`, replays through this build with no difference; under a
# configuration that scores differently it reports the differences and exits 1.
set(BERTH_JOURNAL ${PROJECT_SOURCE_DIR}/bench/journals/seed-stories-1h)
add_test(NAME cli.replay.shipped-journal COMMAND berth replay --journal ${BERTH_JOURNAL})
set_tests_properties(cli.replay.shipped-journal PROPERTIES
  PASS_REGULAR_EXPRESSION "decisions compared: 0 differ" TIMEOUT 60 LABELS cli)
add_test(NAME cli.replay.shipped-journal.exit COMMAND berth replay --journal ${BERTH_JOURNAL})
set_tests_properties(cli.replay.shipped-journal.exit PROPERTIES TIMEOUT 60 LABELS cli)
add_test(NAME cli.replay.changed-config
         COMMAND berth replay --journal ${BERTH_JOURNAL}
                 --config ${PROJECT_SOURCE_DIR}/bench/journals/scores-without-binpack.json)
set_tests_properties(cli.replay.changed-config PROPERTIES
  PASS_REGULAR_EXPRESSION "decisions compared: [1-9][0-9]* differ.*#1 journal-000001.jsonl:[0-9]+ at .*recorded: .*replayed: .*then:.*now:"
  TIMEOUT 60 LABELS cli)
add_test(NAME cli.replay.changed-config.exit
         COMMAND berth replay --journal ${BERTH_JOURNAL}
                 --config ${PROJECT_SOURCE_DIR}/bench/journals/scores-without-binpack.json)
set_tests_properties(cli.replay.changed-config.exit PROPERTIES WILL_FAIL TRUE TIMEOUT 60 LABELS cli)
berth_cli_fails(replay.no-journal "replay needs --journal DIR" ONE_LINE ARGS replay)
berth_cli_fails(replay.empty-dir "no journal files" ONE_LINE ARGS replay --journal ${BERTH_CLI_DATA})
berth_cli_fails(replay.bad-config "config-unknown-field.json: .*unknown field" ONE_LINE
                ARGS replay --journal ${BERTH_JOURNAL} --config ${BERTH_CLI_DATA}/config-unknown-field.json)
