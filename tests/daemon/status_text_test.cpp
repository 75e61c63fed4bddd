// `gradd status` as Prometheus text: a rank's counters become
// gradd_rank_<name>; its eager backwards by reason and what CUDA graphs
// cover of each structure (`structure.<id>.<field>`, engine_state.cpp)
// carry the reason or the structure as a label, every name a valid metric.
// Each family is typed (counter or gauge) once, its samples together.

#include "daemon/status_text.hpp"

#include <catch2/catch.hpp>

TEST_CASE("gradd status labels a rank's reasons and structures in Prometheus text",
          "[daemon]") {
  gradd::actors::daemon_status status;
  gradd::actors::client_status client;
  client.id = 1;
  client.pid = 2;
  client.rank = 0;
  client.report.names = {"backwards", "eager.compile_pending", "structure.7.graph_pieces",
                         "structure.7.plans_only"};
  client.report.values = {10, 3, 4, 0};
  status.per_client.push_back(client);
  auto text = gradd::daemon::format_status(status, "prometheus");
  const std::string who = "{client=\"1\",pid=\"2\",rank=\"0\"";
  CHECK_THAT(text, Catch::Matchers::Contains("gradd_rank_backwards" + who + "} 10\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("gradd_rank_eager_backwards_by_reason" + who
                                             + ",reason=\"compile_pending\"} 3\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("gradd_rank_structure_graph_pieces" + who
                                             + ",structure=\"7\"} 4\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("gradd_rank_structure_plans_only" + who
                                             + ",structure=\"7\"} 0\n"));
  CHECK_THAT(text, !Catch::Matchers::Contains("gradd_rank_structure.7"));
}

TEST_CASE("gradd status types each Prometheus family once, every rank's samples together",
          "[daemon]") {
  gradd::actors::daemon_status status;
  status.requests = 5;
  status.in_flight = 1;
  for (uint64_t id : {1, 2}) {
    gradd::actors::client_status client;
    client.id = id;
    client.report.names = {"backwards", "graphs"};
    client.report.values = {10 * id, id};
    status.per_client.push_back(client);
  }
  auto text = gradd::daemon::format_status(status, "prometheus");
  CHECK_THAT(text, Catch::Matchers::Contains("# TYPE gradd_daemon_requests counter\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("# TYPE gradd_daemon_in_flight gauge\n"));
  CHECK_THAT(text, Catch::Matchers::Contains(
                       "# TYPE gradd_rank_backwards counter\n"
                       "gradd_rank_backwards{client=\"1\",pid=\"0\",rank=\"-1\"} 10\n"
                       "gradd_rank_backwards{client=\"2\",pid=\"0\",rank=\"-1\"} 20\n"
                       "# TYPE gradd_rank_graphs gauge\n"));
  size_t types = 0;
  for (size_t at = text.find("# TYPE gradd_rank_backwards "); at != std::string::npos;
       at = text.find("# TYPE gradd_rank_backwards ", at + 1))
    ++types;
  CHECK(types == 1);
}
