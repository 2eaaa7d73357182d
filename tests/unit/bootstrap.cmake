# Bootstrap unit tests: wire format, ids, launcher environments, ranks as threads.
mpp_unit_test(bootstrap_wire ${CMAKE_CURRENT_LIST_DIR}/bootstrap_wire.c)
mpp_unit_test(bootstrap_id ${CMAKE_CURRENT_LIST_DIR}/bootstrap_id.c)
mpp_unit_test(bootstrap_env ${CMAKE_CURRENT_LIST_DIR}/bootstrap_env.c)
mpp_unit_test(bootstrap_threads ${CMAKE_CURRENT_LIST_DIR}/bootstrap_threads.c)
# Authentication: a squatter on the master port learns no secret and no MAC; where the secret of a
# "host:port" rendezvous comes from (and the one warning when there is none).
mpp_unit_test(bootstrap_squat ${CMAKE_CURRENT_LIST_DIR}/bootstrap_squat.c)
mpp_unit_test(bootstrap_secret_source ${CMAKE_CURRENT_LIST_DIR}/bootstrap_secret_source.c)
# Confidentiality after the handshake (util/seal.h): roundtrip; tampered, replayed, reordered
# records and wrong keys are errors naming the peer.
mpp_unit_test(bootstrap_seal ${CMAKE_CURRENT_LIST_DIR}/bootstrap_seal.c)
# A ring neighbour's notice sent before its close is read after the reset that close caused
# (ring.c's ring_fail, when a send to rank+1 failed): the rank it names is blamed, not rank+1.
mpp_unit_test(bootstrap_notice_reset ${CMAKE_CURRENT_LIST_DIR}/bootstrap_notice_reset.c)
