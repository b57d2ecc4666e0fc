//! DescribeCluster: the cluster id, controller and brokers (KIP-700).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use crate::authorizer::{AclOperation, ResourceType, CLUSTER_NAME, CLUSTER_OPERATIONS};
use crate::handlers::{authorized_operations, cluster_allows};
use crate::request::request_context::RequestContext;
use crate::server_context::ServerContext;

/// Kafka's "authorized operations were not requested" marker.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
const ENDPOINT_TYPE_BROKERS: i8 = 1;
const ENDPOINT_TYPE_CONTROLLERS: i8 = 2;

/// Brokers are listed with their address on the listener the request came in on.
pub async fn handle(
    context: &ServerContext,
    request: DescribeClusterRequest,
    ctx: &RequestContext<'_>,
) -> DescribeClusterResponse {
    // KIP-430, as Kafka: the operations only to a principal that may DESCRIBE the cluster.
    let operations = if !request.include_cluster_authorized_operations {
        AUTHORIZED_OPERATIONS_OMITTED
    } else if cluster_allows(context, ctx, AclOperation::Describe).await {
        let (cluster, supported) = (ResourceType::Cluster, CLUSTER_OPERATIONS);
        authorized_operations(context, ctx, cluster, CLUSTER_NAME, supported).await
    } else {
        0
    };
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_authorized_operations(operations);
    // KIP-919: a controller listener serves the controller endpoint type (the quorum's
    // voters, the leader as controller: how `--bootstrap-controller` tools find the active
    // controller); a broker listener the broker type; v0 cannot ask for another.
    let controllers = match request.endpoint_type {
        ENDPOINT_TYPE_CONTROLLERS if context.routes.serves_quorum_rpcs(ctx.session) => {
            context.quorum.get()
        }
        _ => None,
    };
    if let Some(quorum) = controllers {
        let voters = quorum.voters().voters().iter().map(|v| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(v.id))
                .with_host(StrBytes::from_string(v.host.clone()))
                .with_port(i32::from(v.port))
        });
        let image = context.metadata.image();
        return response
            .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
            .with_controller_id(BrokerId(quorum.status().leader_id))
            .with_brokers(voters.collect());
    }
    let error = match request.endpoint_type {
        ENDPOINT_TYPE_BROKERS => None,
        ENDPOINT_TYPE_CONTROLLERS => Some((
            ResponseError::MismatchedEndpointType,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_string(),
        )),
        other => Some((
            ResponseError::UnsupportedEndpointType,
            format!("Unsupported endpoint type {other}"),
        )),
    };
    if let Some((error, message)) = error {
        return response
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let image = context.metadata.image();
    let brokers = image
        .brokers
        .values()
        .map(|b| {
            let (host, port) = b.address_for(&ctx.session.listener_name);
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port)
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    response
        .with_cluster_id(StrBytes::from_string(image.cluster_id.clone()))
        .with_controller_id(BrokerId(image.controller_id))
        .with_brokers(brokers)
}
