"""loans.access.require: one table of who may change what, one refusal for everyone else."""

import pytest

from loans.access import WRITES, Refused, require

ALLOWED = {  # action: the actors who may
    "ask-burst": {"lead"},
    "cancel-burst": {"lead", "operator"},
    "decide-burst": {"operator"},
    "decide-recommendation": {"lead"},
    "amend-contract": {"operator"},
    "set-overage-policy": {"lead", "operator"},
    "create-sharing-group": {"operator"},
    "add-sharing-member": {"operator"},
    "remove-sharing-member": {"operator"},
}


def test_every_write_has_a_row():
    assert set(WRITES) == set(ALLOWED)


@pytest.mark.parametrize("action", sorted(ALLOWED))
def test_each_write_is_allowed_to_exactly_its_actors(action, tenant, lead, member, outsider,
                                                    operator):
    actors = {"lead": lead, "member": member, "outsider": outsider, "operator": operator}
    for name, user in actors.items():
        if name in ALLOWED[action]:
            require(user, action, tenant.pk)
        else:
            with pytest.raises(Refused) as refused:
                require(user, action, tenant.pk)
            assert str(refused.value.detail) == str(WRITES[action][1])
