//! DescribeCluster: the cluster id, controller and brokers (KIP-700).

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::server::ServerContext;

/// Kafka's "authorized operations were not requested" marker.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
const ENDPOINT_TYPE_BROKERS: i8 = 1;
const UNSUPPORTED_ENDPOINT_TYPE: i16 = 114;

pub fn handle(context: &ServerContext, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
    if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
        return response.with_error_code(UNSUPPORTED_ENDPOINT_TYPE);
    }
    let image = context.metadata.image();
    let brokers = image
        .brokers
        .values()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(b.host.clone()))
                .with_port(b.port)
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    response
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(image.controller_id))
        .with_brokers(brokers)
}
