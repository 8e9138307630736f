"""How often the burn-down's band held the outcome on the fleet's own past: measured once a day
(loans.services.ledger.forecasting), read by the pages."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class BandCoverage(models.Model):
    measured_on = models.DateField(_("measured on"))
    bucket = models.CharField(_("days left"), max_length=8)
    inside = models.PositiveIntegerField(_("inside the band"))
    forecasts = models.PositiveIntegerField(_("forecasts"))

    class Meta:
        verbose_name = _("band coverage")
        verbose_name_plural = _("band coverage")
        constraints = [models.UniqueConstraint(fields=["measured_on", "bucket"],
                                               name="band_coverage_once_a_day")]
        ordering = ["-measured_on", "bucket"]

    def __str__(self) -> str:
        return f"{self.measured_on} {self.bucket}: {self.inside}/{self.forecasts}"
