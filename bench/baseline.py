"""The baseline bench/ingest.py measures the product against: the same samples validated by a
DRF serializer and saved with the ORM (bulk_create), as a conventional Django API would do.
On PostgreSQL the database adds its rows to the rollups, as it does for every insert into the
sample table (migration metering 0004); it applies no attribution rule, checks no repeats or
conflicts and names no rejected sample, so it still does less than the product's endpoint."""

from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from metering.intake import owners
from metering.models import Gpu, Node, UsageSample


class SampleSerializer(serializers.Serializer):
    gpu_uuid = serializers.CharField(max_length=96)
    ts = serializers.DateTimeField()
    interval_s = serializers.IntegerField(min_value=1, max_value=3600)
    allocated = serializers.BooleanField()
    fraction = serializers.FloatField(min_value=0, max_value=1, default=1.0)
    util_pct = serializers.FloatField(min_value=0, max_value=100, required=False)
    mem_used_mib = serializers.IntegerField(min_value=0, required=False)
    power_w = serializers.FloatField(min_value=0, required=False)
    temp_c = serializers.IntegerField(required=False)
    owner = serializers.DictField(child=serializers.CharField(), required=False)


class BatchSerializer(serializers.Serializer):
    node = serializers.CharField()
    samples = SampleSerializer(many=True)


class BaselineSamples(APIView):
    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []

    def post(self, request):
        batch = BatchSerializer(data=request.data)
        batch.is_valid(raise_exception=True)
        node = Node.objects.get(name=batch.validated_data["node"])
        samples = batch.validated_data["samples"]
        uuids = {s["gpu_uuid"] for s in samples}
        gpus = {gpu.uuid: gpu for gpu in Gpu.objects.filter(uuid__in=uuids)}
        for uuid in uuids - set(gpus):
            gpus[uuid], _ = Gpu.objects.get_or_create(uuid=uuid, defaults={"node": node})
        owner_ids = owners.ids_of([s.get("owner") for s in samples])
        UsageSample.objects.bulk_create(
            [UsageSample(gpu=gpus[s["gpu_uuid"]], ts=s["ts"], owner_id=owner_id,
                         tenant=node.default_tenant, interval_s=s["interval_s"],
                         allocated=s["allocated"], fraction=s["fraction"],
                         util_pct=s.get("util_pct"), mem_used_mib=s.get("mem_used_mib"),
                         power_w=s.get("power_w"), temp_c=s.get("temp_c"))
             for s, owner_id in zip(samples, owner_ids, strict=True)],
            ignore_conflicts=True,
        )
        node.last_seen_at = timezone.now()
        node.save(update_fields=["last_seen_at"])
        return Response({"accepted": len(samples)}, status=status.HTTP_202_ACCEPTED)
