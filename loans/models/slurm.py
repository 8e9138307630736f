"""What gpuloans changed in Slurm's limits (loans.schedulers.slurm.limits): one row a change."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from loans.models.tenants import Tenant


class SlurmLimitChange(models.Model):
    """A change apply_quotas --slurm made (or tried) to a Slurm account or burst QOS, with the
    command and what sacctmgr said."""

    at = models.DateTimeField(_("at"))
    cluster = models.CharField(_("cluster"), max_length=100)
    account = models.CharField(_("account"), max_length=253)
    tenant = models.ForeignKey(Tenant, verbose_name=_("tenant"), on_delete=models.SET_NULL,
                               null=True, blank=True, related_name="slurm_limit_changes")
    change = models.CharField(_("change"), max_length=300)
    command = models.TextField(_("command"))
    succeeded = models.BooleanField(_("succeeded"))
    output = models.TextField(_("sacctmgr said"), blank=True)

    class Meta:
        verbose_name = _("Slurm limit change")
        verbose_name_plural = _("Slurm limit changes")
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.account}: {self.change}"


class SlurmAccountHold(models.Model):
    """An account whose GPU limit gpuloans holds while the account's tenant has a contract
    running: the limit that was there before (set by hand, or none), restored when no contract
    runs, and the limit gpuloans last set, so that one changed by hand since is left alone."""

    cluster = models.CharField(_("cluster"), max_length=100)
    account = models.CharField(_("account"), max_length=253)
    hand_set_gpus = models.IntegerField(_("GPU limit before gpuloans"), null=True, blank=True)
    set_gpus = models.IntegerField(_("GPU limit gpuloans set"), null=True, blank=True)
    since = models.DateTimeField(_("since"))

    class Meta:
        verbose_name = _("Slurm account held")
        verbose_name_plural = _("Slurm accounts held")
        constraints = [models.UniqueConstraint(fields=["cluster", "account"],
                                               name="one_hold_per_slurm_account")]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.account}"
