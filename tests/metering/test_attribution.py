from metering.attribution import Attributor, Rule

PROD, LAB = 1, 2  # clusters
RULES = [
    Rule(1, "namespace", "team-a", cluster_id=PROD),
    Rule(2, "user", "bob", cluster_id=PROD),
    Rule(3, "node", "gpu-node-07"),
    Rule(4, "job", "1234", priority=5, cluster_id=PROD),
    Rule(5, "account", "proj-x", cluster_id=PROD),
    Rule(6, "namespace", "team-a", cluster_id=LAB),
]


def tenant(owner, node="gpu-node-01", default=None, cluster=PROD):
    return Attributor(RULES).tenant_for(owner, node, cluster, default)


def test_a_namespace_rule_claims_the_sample():
    assert tenant({"namespace": "team-a", "pod": "train-0"}) == 1


def test_field_order_breaks_ties_between_rules_of_equal_priority():
    assert tenant({"namespace": "team-a", "user": "bob", "account": "proj-x"}) == 1
    assert tenant({"user": "bob", "account": "proj-x"}) == 5
    assert tenant({"user": "bob"}, node="gpu-node-07") == 2


def test_a_lower_priority_number_wins_over_field_order():
    assert tenant({"namespace": "team-a", "job": "1234"}) == 4


def test_a_node_rule_claims_samples_without_a_matching_owner():
    assert tenant({"namespace": "elsewhere"}, node="gpu-node-07") == 3
    assert tenant(None, node="gpu-node-07") == 3


def test_the_node_default_tenant_takes_what_no_rule_claims():
    assert tenant({"namespace": "elsewhere"}, default=9) == 9


def test_unclaimed_usage_without_a_default_stays_unattributed():
    assert tenant({"namespace": "elsewhere"}) is None
    assert tenant({}) is None
    assert tenant(None) is None


def test_values_are_matched_exactly_and_as_text():
    assert tenant({"namespace": "Team-A"}) is None
    assert tenant({"job": 1234}) == 4
    assert tenant({"namespace": ""}) is None


def test_an_owner_rule_holds_only_within_its_cluster():
    assert tenant({"namespace": "team-a"}, cluster=LAB) == 6
    assert tenant({"user": "bob"}, cluster=LAB) is None
    assert tenant({"namespace": "team-a"}, cluster=3) is None
    assert tenant({"namespace": "team-a"}, node="gpu-node-07", cluster=3) == 3  # node rules
